// Package resultstest checks results messages against the published JSON
// Schema, docs/results.schema.json, so the schema a downstream team reads and
// the messages lrosink produces cannot drift apart: every sink and recorder
// used in the test suite validates what it is given.
package resultstest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/lrosink/lrosink/internal/results"
)

// SchemaPath is the schema's place in the repository.
const SchemaPath = "docs/results.schema.json"

// compiled is read once per test binary; it never changes afterwards.
var compiled = sync.OnceValues(compile)

func compile() (*jsonschema.Schema, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(root, SchemaPath)
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("resultstest: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("resultstest: %s is not JSON: %w", SchemaPath, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat() // date-time is checked, not just annotated
	if err := c.AddResource(path, doc); err != nil {
		return nil, fmt.Errorf("resultstest: %s: %w", SchemaPath, err)
	}
	return c.Compile(path)
}

// moduleRoot walks up from the working directory (a package directory under
// go test) to the directory holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("resultstest: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("resultstest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Validate checks one message as JSON: Pub/Sub message data, or a file:/stdout
// line (data plus "attributes").
func Validate(data []byte) error {
	s, err := compiled()
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("results message is not JSON: %w", err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("results message violates %s: %w\nmessage: %s", SchemaPath, err, data)
	}
	return nil
}

// ValidateMessage checks m as the sinks would write it: its data with its
// attributes, as one file:/stdout line.
func ValidateMessage(m results.Message) error {
	data, err := m.Data()
	if err != nil {
		return err
	}
	line := map[string]any{}
	if err := json.Unmarshal(data, &line); err != nil {
		return err
	}
	line["attributes"] = m.Attributes()
	b, err := json.Marshal(line)
	if err != nil {
		return err
	}
	return Validate(b)
}

// Check fails t unless data validates.
func Check(t testing.TB, data []byte) {
	t.Helper()
	if err := Validate(data); err != nil {
		t.Error(err)
	}
}
