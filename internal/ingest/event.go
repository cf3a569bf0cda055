package ingest

import (
	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/lifecycle"
)

// applied is the event the door carries through its stages: the caller's
// event plus what the door alone sets on the event it applies in place of a
// hint (the state the delivery stated, and who confirmed the state applied,
// "" when nobody could). Kept out of event.Event so no caller can set them.
type applied struct {
	event.Event
	delivered   lifecycle.State
	confirmedBy string
}
