package opname

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// validDocID checks every Firestore document id rule explicitly, without
// reusing DocID's own logic.
func validDocID(id string) error {
	switch {
	case id == "":
		return errors.New("empty")
	case !utf8.ValidString(id):
		return errors.New("not valid UTF-8")
	case strings.Contains(id, "/"):
		return errors.New(`contains "/"`)
	case id == "." || id == "..":
		return errors.New(`is "." or ".."`)
	case len(id) >= 4 && strings.HasPrefix(id, "__") && strings.HasSuffix(id, "__"): // full match of __.*__
		return errors.New("matches __.*__")
	case len(id) > 1500:
		return fmt.Errorf("%d bytes, over 1500", len(id))
	}
	return nil
}

type docIDCase struct {
	key     string
	want    string
	wantErr string
}

func docIDCases() []docIDCase {
	return []docIDCase{
		{key: "gemini:batches/abc", want: "gemini:batches%2Fabc"},
		{key: "gemini:operations/abc", want: "gemini:operations%2Fabc"},
		{key: "gemini:interactions/v1_Chd-x_y", want: "gemini:interactions%2Fv1_Chd-x_y"},
		{key: "gemini:batchPredictionJobs/123", want: "gemini:batchPredictionJobs%2F123"},
		{key: "plain", want: "plain"},
		{key: "/", want: "%2F"},
		{key: "//", want: "%2F%2F"},
		{key: "%", want: "%25"},
		{key: "a%b", want: "a%25b"},
		{key: "a%2Fb", want: "a%252Fb"},
		{key: "%2E", want: "%252E"},
		{key: "%5F_", want: "%255F_"},
		{key: ".", want: "%2E"},
		{key: "..", want: "%2E%2E"},
		{key: "...", want: "..."},
		{key: "./", want: ".%2F"},
		{key: "_", want: "_"},
		{key: "_x_", want: "_x_"},
		{key: "__", want: "%5F_"},
		{key: "___", want: "%5F__"},
		{key: "__x__", want: "%5F_x__"},
		{key: "__x", want: "%5F_x"},
		{key: "x__", want: "x__"},
		{key: "é/ü", want: "é%2Fü"},
		{key: "a\nb", want: "a\nb"},
		{key: strings.Repeat("a", 1500), want: strings.Repeat("a", 1500)},
		{key: strings.Repeat("/", 500), want: strings.Repeat("%2F", 500)},
		{key: "", wantErr: "empty"},
		{key: "a\xff", wantErr: "UTF-8"},
		{key: strings.Repeat("a", 1501), wantErr: "over Firestore's 1500"},
		{key: strings.Repeat("/", 501), wantErr: "over Firestore's 1500"},
	}
}

func TestDocID(t *testing.T) {
	for _, tc := range docIDCases() {
		got, err := DocID(tc.key)
		if tc.wantErr != "" {
			if err == nil || !errors.Is(err, ErrInvalidKey) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("DocID(%.40q) = %.40q, %v; want ErrInvalidKey containing %q", tc.key, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("DocID(%.40q) = %.40q, %v; want %.40q", tc.key, got, err, tc.want)
			continue
		}
		if err := validDocID(got); err != nil {
			t.Errorf("DocID(%.40q) = %.40q is not a valid Firestore id: %v", tc.key, got, err)
		}
		back, err := KeyFromDocID(got)
		if err != nil || back != tc.key {
			t.Errorf("KeyFromDocID(%.40q) = %.40q, %v; want %.40q", got, back, err, tc.key)
		}
	}
}

// TestKeyFromDocIDRejectsForeignIDs: ids DocID never produces must not
// decode, otherwise two ids could map to one key.
func TestKeyFromDocIDRejectsForeignIDs(t *testing.T) {
	for _, id := range []string{
		"", "\xff", "a/b", ".", "..", "__x__", "__",
		"%", "%2", "a%", "%zz", "%2f", "%2e", "%5f_", "%41",
		"a%2Eb", "%2E%2E%2E", "%2Ex", "%5Fx", "%5F%5F", "x%5F_",
		strings.Repeat("a", 1501),
	} {
		if key, err := KeyFromDocID(id); err == nil {
			t.Errorf("KeyFromDocID(%.40q) = %.40q, want error", id, key)
		} else if !errors.Is(err, ErrInvalidKey) {
			t.Errorf("KeyFromDocID(%.40q) error %v does not wrap ErrInvalidKey", id, err)
		}
	}
}

// TestDocIDOfLongestName: every name Normalize accepts must fit Firestore.
func TestDocIDOfLongestName(t *testing.T) {
	raw := "projects/p/locations/l/batches/" + strings.Repeat("a", 255)
	n, err := Normalize(raw, KindUnknown)
	if err != nil {
		t.Fatal(err)
	}
	id, err := DocID(n.Key())
	if err != nil {
		t.Fatal(err)
	}
	if err := validDocID(id); err != nil {
		t.Fatal(err)
	}
}

// TestEscapeDocIDMatchesReplacer pins the hand-written escape to the
// strings.Replacer it replaced, byte for byte, on the pinned cases and on
// keys mixing the escaped characters with multi-byte UTF-8.
func TestEscapeDocIDMatchesReplacer(t *testing.T) {
	ref := strings.NewReplacer("%", "%25", "/", "%2F")
	keys := []string{"", "plain", "%", "/", "%%//", "a/b%c/", "gemini:batches/abc", "é/%ü/"}
	for _, tc := range docIDCases() {
		keys = append(keys, tc.key)
	}
	for _, k := range keys {
		if got, want := escapeDocID(k), ref.Replace(k); got != want {
			t.Errorf("escapeDocID(%q) = %q, want %q", k, got, want)
		}
	}
}

// TestDocIDOfPlainKeyDoesNotAllocate: the webhook path's common key (no
// "%" or "/") costs no allocation.
func TestDocIDOfPlainKeyDoesNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _, _ = DocID("gemini:batches-abc") }); n != 0 {
		t.Errorf("DocID of a plain key: %v allocations, want 0", n)
	}
}
