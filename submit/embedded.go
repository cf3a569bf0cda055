package submit

import (
	"context"
	"errors"
	"fmt"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/register"
)

// Embedded returns the Intents of a ledger this process holds
// (register.Intents over it, as internal/app builds App.Intents): the
// embedded path of `lrosink submit` without a Register URL, and of
// lrosink's own tests and simulator. The same calls POST /Register makes,
// in process; its refusals match the same errors (ErrIntentMismatch,
// ErrIntentUnknown, ErrIntentBoundElsewhere, ErrInvalidIntent). Code
// outside lrosink's module uses HTTP.
func Embedded(in *register.Intents) Intents { return embedded{in} }

type embedded struct{ in *register.Intents }

func (e embedded) Record(ctx context.Context, i Intent) (IntentStatus, error) {
	st, created, err := e.in.Record(ctx, register.Intent{Key: i.Key, Kind: i.Kind, Model: i.Model, DisplayName: i.DisplayName, Metadata: i.Metadata})
	if err != nil {
		return IntentStatus{}, fmt.Errorf("record intent %s: %w", i.Key, refusal(err))
	}
	out := fromRegister(st)
	out.Recorded = created
	return out, nil
}

func (e embedded) Bind(ctx context.Context, key, name string) (IntentStatus, error) {
	st, _, err := e.in.Bind(ctx, key, name)
	if err != nil {
		return IntentStatus{}, fmt.Errorf("bind intent %s to %s: %w", key, name, refusal(err))
	}
	return fromRegister(st), nil
}

func fromRegister(st register.IntentStatus) IntentStatus {
	return IntentStatus{
		Intent: Intent{Key: st.Key, Kind: st.Kind, Model: st.Model, DisplayName: st.DisplayName, Metadata: st.Metadata},
		State:  st.State, Name: st.Name, APIName: st.APIName, BoundBy: st.BoundBy,
		CreatedAt: st.CreatedAt, GraceUntil: st.GraceUntil, BoundAt: st.BoundAt,
	}
}

// LedgerError is a refusal of the embedded Intents: the reason label the
// Register function would answer with (match with errors.Is against
// ErrIntentMismatch, ErrIntentUnknown, ErrIntentBoundElsewhere,
// ErrInvalidIntent) and why.
type LedgerError struct {
	Reason string
	Err    error
}

func (e *LedgerError) Error() string { return e.Reason + ": " + e.Err.Error() }
func (e *LedgerError) Unwrap() error { return e.Err }

// Is matches the reason's sentinel.
func (e *LedgerError) Is(target error) bool {
	for _, s := range []error{ErrIntentMismatch, ErrIntentUnknown, ErrIntentBoundElsewhere, ErrInvalidIntent} {
		if target == s {
			return e.Reason == s.Error()
		}
	}
	return false
}

// refusal is err as a LedgerError when it is the intent path's refusal.
func refusal(err error) error {
	var inv *event.InvalidError
	if errors.As(err, &inv) {
		return &LedgerError{Reason: inv.Reason, Err: inv.Err}
	}
	return err
}
