package webhook

import "time"

// DefaultDeadline is LROSINK_WEBHOOK_DEADLINE's default: how long the
// Webhook function waits for the ingest door before it answers 503
// deadline-exceeded (the work goes on). A sender counts a held connection as
// a failed delivery anyway. It lives here, beside the delivery it bounds,
// so config and httpapi both refer to it without importing each other.
const DefaultDeadline = 10 * time.Second
