package httpapi_test

import (
	"encoding/base64"
	"io"
)

func newB64(w io.Writer) io.WriteCloser { return base64.NewEncoder(base64.StdEncoding, w) }
