//go:build !unix

package sink

import "os"

// lockAlone: no advisory locks here, so a File takes itself to be alone.
func lockAlone(*os.File) bool { return true }

func lockShared(*os.File) error { return nil }
