package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestCloudLoggingFields(t *testing.T) {
	cases := []struct {
		name      string
		header    http.Header
		wantTrace string
		wantSpan  string
	}{
		{"cloud trace header", http.Header{"X-Cloud-Trace-Context": {"105445aa7843bc8bf206b12000100000/1;o=1"}}, "projects/p1/traces/105445aa7843bc8bf206b12000100000", "0000000000000001"},
		// The header's span is decimal; Cloud Logging's spanId is 16 hex
		// digits (a decimal one was logged as is).
		{"cloud trace header, large span", http.Header{"X-Cloud-Trace-Context": {"105445aa7843bc8bf206b12000100000/1234567;o=1"}}, "projects/p1/traces/105445aa7843bc8bf206b12000100000", "000000000012d687"},
		{"traceparent", http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}, "projects/p1/traces/4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"},
		{"malformed header ignored", http.Header{"X-Cloud-Trace-Context": {"not a trace\"/x"}}, "", ""},
		{"none", http.Header{}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := New(&buf, slog.LevelDebug, "p1")
			ctx := ContextWithTrace(t.Context(), c.header)
			log.WarnContext(ctx, "hello", "k", "v")
			var got map[string]any
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatalf("not one JSON line: %q: %v", buf.String(), err)
			}
			if got["severity"] != "WARNING" || got["message"] != "hello" || got["k"] != "v" {
				t.Fatalf("fields wrong: %v", got)
			}
			if _, ok := got["level"]; ok {
				t.Fatalf("slog level key leaked: %v", got)
			}
			if tr, _ := got[TraceKey].(string); tr != c.wantTrace {
				t.Fatalf("trace = %q, want %q", tr, c.wantTrace)
			}
			if sp, _ := got[SpanKey].(string); sp != c.wantSpan {
				t.Fatalf("span = %q, want %q", sp, c.wantSpan)
			}
		})
	}
}

func TestSeverityMapping(t *testing.T) {
	for l, want := range map[slog.Level]string{slog.LevelDebug: "DEBUG", slog.LevelInfo: "INFO", slog.LevelWarn: "WARNING", slog.LevelError: "ERROR"} {
		var buf bytes.Buffer
		New(&buf, slog.LevelDebug, "").Log(t.Context(), l, "m")
		var got map[string]any
		if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if got["severity"] != want {
			t.Errorf("level %v → %v, want %s", l, got["severity"], want)
		}
	}
}

// The middleware hands the handler a request whose context carries the
// trace, and the request itself when there is none (no copy per request).
func TestMiddlewareCopiesTheRequestOnlyForATrace(t *testing.T) {
	for _, c := range []struct {
		name      string
		header    http.Header
		wantTrace bool
	}{
		{"traceparent", http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}, true},
		{"none", http.Header{}, false},
		{"malformed", http.Header{"Traceparent": {"zz"}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/Webhook", nil)
			r.Header = c.header
			var got *http.Request
			Middleware(http.HandlerFunc(func(_ http.ResponseWriter, in *http.Request) { got = in })).ServeHTTP(httptest.NewRecorder(), r)
			_, traced := got.Context().Value(traceKey{}).(trace)
			if traced != c.wantTrace {
				t.Fatalf("trace in the handler's context: %v, want %v", traced, c.wantTrace)
			}
			if copied := got != r; copied != c.wantTrace {
				t.Fatalf("request copied: %v, want %v", copied, c.wantTrace)
			}
		})
	}
}
