// Package register is the one registration path: POST /Register and
// `lrosink register` both call Register, so a name, its kind and its
// metadata are handled alike and the operation is stored with the same API
// name (a Veo operation keeps its model) and the same first check (the
// door's grace, from the configuration both entry points load). Intents
// (intents.go) is the one intent path, of POST /Register's intent protocol
// and the embedded `lrosink submit`; its Bind is a registration too.
package register

import (
	"context"
	"fmt"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
)

// Door is the ingest door as registration uses it.
type Door interface {
	Ingest(ctx context.Context, ev event.Event) (ingest.Result, error)
}

// Request is one registration.
type Request struct {
	// Name is any form Gemini uses; a bare id needs Kind.
	Name string
	// Kind is "batch", "video", "interaction" or empty (from the name).
	Kind     string
	Metadata map[string]any
	// LeaveOwed leaves a settled operation's owed results message to the
	// next reconcile pass (Result.EffectOwed) instead of publishing it: for
	// a caller that has no results sink of its own.
	LeaveOwed bool
}

// Result is the door's answer plus whether this call created the operation.
type Result struct {
	ingest.Result
	// Created: this registration stored the operation (first sighting).
	// Otherwise it was known: its state is untouched and the metadata keys
	// it lacked were merged.
	Created bool
}

// Validate checks req without storing anything and returns the normalized
// name; its error is an *event.InvalidError. Register calls it; a command can call
// it first to fail before it opens a ledger.
func (req Request) Validate() (opname.Name, error) {
	kind := opname.KindUnknown
	if req.Kind != "" {
		k, ok := opname.ParseKind(req.Kind)
		if !ok {
			return opname.Name{}, &event.InvalidError{Reason: event.ReasonInvalidKind,
				Err: fmt.Errorf("kind %q: want batch, video or interaction", req.Kind)}
		}
		kind = k
	}
	name, err := opname.Normalize(req.Name, kind)
	if err != nil {
		return opname.Name{}, &event.InvalidError{Reason: event.ReasonInvalidName, Err: err}
	}
	// The door would drop metadata it cannot keep and go on; a submitter is
	// told instead, before anything is stored. The intent key is lrosink's
	// (the door keeps it out of an operation's metadata).
	if _, ok := req.Metadata[event.IntentMetadataKey]; ok {
		return opname.Name{}, &event.InvalidError{Reason: event.ReasonInvalidMetadata,
			Err: fmt.Errorf("metadata key %q is lrosink's: bind the operation to its intent instead (CONTRACT.md §5)", event.IntentMetadataKey)}
	}
	if err := ledger.CheckMetadata(req.Metadata); err != nil {
		return opname.Name{}, &event.InvalidError{Reason: event.ReasonInvalidMetadata, Err: fmt.Errorf("metadata: %w", err)}
	}
	return name, nil
}

// Register validates req and hands it to the door as a PENDING event from
// source "register". Errors are an *event.InvalidError (nothing stored) or the
// door's own error.
func Register(ctx context.Context, door Door, req Request) (Result, error) {
	return register(ctx, door, req, "")
}

// register is Register binding intent key intent ("" none: a plain
// registration), which the door refuses as the caller's error when it
// cannot be bound (Intents.Bind).
func register(ctx context.Context, door Door, req Request, intent string) (Result, error) {
	name, err := req.Validate()
	if err != nil {
		return Result{}, err
	}
	// APIName is the most specific spelling (the model of a Veo
	// operation); it normalizes to the same key, and the door keeps it as
	// the name the reconciler asks Gemini with.
	res, err := door.Ingest(ctx, event.Event{Name: name.APIName, Kind: name.Kind, State: lifecycle.Pending,
		Source: event.SourceRegister, UserMetadata: req.Metadata, LeaveOwed: req.LeaveOwed, Intent: intent})
	if err != nil {
		return Result{Result: res}, err
	}
	return Result{Result: res,
		Created: res.Outcome == ingest.OutcomeApplied && res.Reason == string(lifecycle.ReasonFirstSighting)}, nil
}
