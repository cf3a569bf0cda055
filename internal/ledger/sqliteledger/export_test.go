package sqliteledger

import "testing"

// HoldWriter and WaitQueued give the external tests the group-forming
// helpers of groupcommit_test.go.
func HoldWriter(t testing.TB, s *Store) (release func()) { return holdWriter(t, s) }

func WaitQueued(s *Store, n int) { waitQueued(s, n) }
