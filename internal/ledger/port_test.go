package ledger_test

import (
	"reflect"
	"testing"

	"github.com/lrosink/lrosink/internal/ledger"
)

// TestPortIsStorageOnly: no method of the port takes or returns a lease,
// and none is a step of the claim protocol; those live in package claims.
func TestPortIsStorageOnly(t *testing.T) {
	lease := reflect.TypeFor[ledger.Lease]()
	protocol := map[string]bool{"CommitOperation": true, "SeizeClaim": true, "ReleaseClaim": true,
		"CompleteClaim": true, "ScheduleCheck": true, "RecordStuckAlert": true}
	port := reflect.TypeFor[ledger.Ledger]()
	for m := range port.Methods() {
		if protocol[m.Name] {
			t.Errorf("ledger.Ledger.%s is a step of the claim protocol", m.Name)
		}
		var types []reflect.Type
		for i := range m.Type.NumIn() {
			types = append(types, m.Type.In(i))
		}
		for i := range m.Type.NumOut() {
			types = append(types, m.Type.Out(i))
		}
		for _, ty := range types {
			for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice {
				ty = ty.Elem()
			}
			if ty == lease {
				t.Errorf("ledger.Ledger.%s takes or returns a lease", m.Name)
			}
		}
	}
}
