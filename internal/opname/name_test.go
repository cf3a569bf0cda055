package opname

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
)

type normalizeCase struct {
	name    string
	raw     string
	hint    Kind
	want    Name   // checked when wantErr is empty
	wantErr string // substring of the expected error
}

const veoAPI = "models/veo-3.0-generate-001/operations/abc"

// normalizeCases is shared by the table test and the fuzz seed corpus.
func normalizeCases() []normalizeCase {
	batchABC := Name{Canonical: "batches/abc", Kind: KindBatch, ID: "abc", APIName: "batches/abc"}
	batch123 := Name{Canonical: "batches/batch_123456", Kind: KindBatch, ID: "batch_123456", APIName: "batches/batch_123456"}
	videoABC := Name{Canonical: "operations/abc", Kind: KindVideo, ID: "abc", APIName: "operations/abc"}
	veoABC := Name{Canonical: "operations/abc", Kind: KindVideo, ID: "abc", APIName: veoAPI}
	inter := Name{Canonical: "interactions/v1_Chd-x_y", Kind: KindInteraction, ID: "v1_Chd-x_y", APIName: "interactions/v1_Chd-x_y"}
	long255 := strings.Repeat("a", 255)
	return []normalizeCase{
		// Batch.
		{name: "batch api name", raw: "batches/abc", want: batchABC},
		{name: "batch api name with hint", raw: "batches/abc", hint: KindBatch, want: batchABC},
		{name: "batch spaces around", raw: "  batches/abc \n", want: batchABC},
		{name: "batch unicode spaces around", raw: "\u00a0\u2003batches/abc\u3000", want: batchABC},
		{name: "batch trailing slash", raw: "batches/abc/", want: batchABC},
		{name: "batch trailing slashes and space", raw: "\tbatches/abc/// \r\n", want: batchABC},
		{name: "batch bare webhook id", raw: "batch_123456", hint: KindBatch, want: batch123},
		{name: "batch prefixed webhook id", raw: "batches/batch_123456", hint: KindBatch, want: batch123},
		{name: "batch vertex location prefix", raw: "projects/p/locations/us-central1/batches/abc", want: batchABC},
		{name: "batch vertex location prefix trailing slash", raw: "projects/p/locations/us-central1/batches/abc/", hint: KindBatch, want: batchABC},
		{name: "batch prediction job vertex", raw: "projects/my-proj/locations/us-central1/batchPredictionJobs/1234567890",
			want: Name{Canonical: "batchPredictionJobs/1234567890", Kind: KindBatch, ID: "1234567890", APIName: "batchPredictionJobs/1234567890"}},
		{name: "batch prediction job collapsed", raw: "batchPredictionJobs/1234567890", hint: KindBatch,
			want: Name{Canonical: "batchPredictionJobs/1234567890", Kind: KindBatch, ID: "1234567890", APIName: "batchPredictionJobs/1234567890"}},
		{name: "batch all allowed id characters", raw: "batches/a._~=+:@-Z9",
			want: Name{Canonical: "batches/a._~=+:@-Z9", Kind: KindBatch, ID: "a._~=+:@-Z9", APIName: "batches/a._~=+:@-Z9"}},
		{name: "batch 255 byte id", raw: "batches/" + long255,
			want: Name{Canonical: "batches/" + long255, Kind: KindBatch, ID: long255, APIName: "batches/" + long255}},

		// Video.
		{name: "video operations name", raw: "operations/abc", want: videoABC},
		{name: "video bare id", raw: "abc", hint: KindVideo, want: videoABC},
		{name: "video bare id trailing newline", raw: "abc\n", hint: KindVideo, want: videoABC},
		{name: "video model name", raw: veoAPI, want: veoABC},
		{name: "video model name with hint", raw: " " + veoAPI + "/ ", hint: KindVideo, want: veoABC},
		{name: "video vertex publisher", raw: "projects/p/locations/us-central1/publishers/google/" + veoAPI, want: veoABC},
		{name: "video publisher without location", raw: "publishers/google/" + veoAPI, hint: KindVideo, want: veoABC},
		{name: "video vertex location operation", raw: "projects/123/locations/global/operations/abc", want: videoABC},

		// Interaction.
		{name: "interaction api name", raw: "interactions/v1_Chd-x_y", want: inter},
		{name: "interaction bare id", raw: "v1_Chd-x_y", hint: KindInteraction, want: inter},
		{name: "interaction bare id padded", raw: "v1_ChdDb2xhYl9==", hint: KindInteraction,
			want: Name{Canonical: "interactions/v1_ChdDb2xhYl9==", Kind: KindInteraction, ID: "v1_ChdDb2xhYl9==", APIName: "interactions/v1_ChdDb2xhYl9=="}},
		{name: "interaction vertex prefix", raw: "projects/p/locations/global/interactions/v1_Chd-x_y/", want: inter},

		// Hint problems.
		{name: "bare id without hint", raw: "abc", wantErr: "needs a kind"},
		{name: "hint video on batch", raw: "batches/abc", hint: KindVideo, wantErr: `is of kind "batch"`},
		{name: "hint batch on operation", raw: "operations/abc", hint: KindBatch, wantErr: `is of kind "video"`},
		{name: "hint interaction on model operation", raw: veoAPI, hint: KindInteraction, wantErr: `is of kind "video"`},
		{name: "hint batch on interaction", raw: "interactions/v1_x", hint: KindBatch, wantErr: `is of kind "interaction"`},
		{name: "hint video on prediction job", raw: "batchPredictionJobs/1", hint: KindVideo, wantErr: `is of kind "batch"`},
		{name: "unknown hint", raw: "batches/abc", hint: Kind("tuning"), wantErr: "unknown kind hint"},

		// Empty and truncated.
		{name: "empty", raw: "", wantErr: "empty"},
		{name: "only spaces", raw: "   ", hint: KindBatch, wantErr: "empty"},
		{name: "only whitespace mix", raw: "\t\n\u00a0 ", hint: KindBatch, wantErr: "empty"},
		{name: "only slashes", raw: " /// ", hint: KindBatch, wantErr: "empty"},
		{name: "collection without id", raw: "batches/", wantErr: "collection name without an id"},
		{name: "collection without id with hint", raw: "batches/", hint: KindBatch, wantErr: "collection name without an id"},
		{name: "operations without id", raw: "operations", hint: KindVideo, wantErr: "collection name without an id"},
		{name: "model without operation id", raw: "models/veo/operations/", hint: KindVideo, wantErr: "unknown name form"},
		{name: "location prefix only", raw: "projects/p/locations/us-central1/", hint: KindBatch, wantErr: "projects/P/locations/L"},
		{name: "location prefix collection only", raw: "projects/p/locations/us-central1/batches/", hint: KindBatch, wantErr: "projects/P/locations/L"},

		// Path tricks.
		{name: "dot dot segment", raw: "batches/../x", wantErr: "segment"},
		{name: "dot dot id", raw: "batches/..", wantErr: "segment"},
		{name: "dot id", raw: "batches/.", wantErr: "segment"},
		{name: "nested id", raw: "batches/a/b", wantErr: "unknown name form"},
		{name: "double slash", raw: "batches//a", wantErr: "empty path segment"},
		{name: "leading slash", raw: "/batches/a", wantErr: "empty path segment"},
		{name: "url", raw: "https://generativelanguage.googleapis.com/v1beta/batches/abc", wantErr: "empty path segment"},
		{name: "escaped slash", raw: "%2F", hint: KindBatch, wantErr: "segment"},
		{name: "escaped slash in id", raw: "batches/a%2Fb", wantErr: "segment"},
		{name: "space inside", raw: "batches/a b", wantErr: "segment"},
		{name: "zero width space inside", raw: "batches/a\u200bb", wantErr: "segment"},
		{name: "non ascii id", raw: "batches/é", wantErr: "segment"},
		{name: "newline inside", raw: "batches/a\nb", wantErr: "control character"},
		{name: "nul byte", raw: "batches/a\x00", wantErr: "control character"},
		{name: "nul only", raw: "\x00", hint: KindBatch, wantErr: "control character"},
		{name: "escape char", raw: "batches/\x1b[31m", wantErr: "control character"},
		{name: "invalid utf8", raw: "batches/\xff", wantErr: "UTF-8"},
		{name: "truncated utf8", raw: "\xc3", hint: KindBatch, wantErr: "UTF-8"},
		{name: "2000 char id", raw: "batches/" + strings.Repeat("a", 2000), wantErr: "longer than 1024"},
		{name: "raw too long by whitespace", raw: strings.Repeat(" ", 1020) + "batches/a", wantErr: "longer than 1024"},
		{name: "256 byte id", raw: "batches/" + long255 + "b", wantErr: "segment"},
		{name: "dunder id", raw: "__x__", hint: KindBatch, wantErr: "segment"},
		{name: "dunder prefixed id", raw: "batches/__x__", wantErr: "segment"},
		{name: "leading dash id", raw: "-abc", hint: KindInteraction, wantErr: "segment"},

		// Unknown forms.
		{name: "files", raw: "files/x", wantErr: "unknown name form"},
		{name: "tuned models", raw: "tunedModels/x", wantErr: "unknown name form"},
		{name: "tuned model operation", raw: "tunedModels/x/operations/y", wantErr: "unknown name form"},
		{name: "foo bar", raw: "foo/bar", wantErr: "unknown name form"},
		{name: "model only", raw: "models/gemini-2.5-pro", wantErr: "unknown name form"},
		{name: "model operation extra", raw: veoAPI + "/x", wantErr: "unknown name form"},
		{name: "capitalised collection", raw: "Batches/abc", wantErr: "unknown name form"},
		{name: "projects without locations", raw: "projects/p/batches/abc/x/y", wantErr: "projects/P/locations/L"},
		{name: "double location prefix", raw: "projects/p/locations/l/projects/p/locations/l/batches/a", wantErr: "unknown name form"},
		{name: "other publisher", raw: "projects/p/locations/l/publishers/acme/" + veoAPI, wantErr: "publishers/google"},
		{name: "publisher model only", raw: "publishers/google/models/m", wantErr: "publishers/google"},
	}
}

func TestNormalize(t *testing.T) {
	for _, tc := range normalizeCases() {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Normalize(tc.raw, tc.hint)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("Normalize(%q, %q) = %+v, want error containing %q", tc.raw, tc.hint, got, tc.wantErr)
				}
				if !errors.Is(err, ErrInvalidName) {
					t.Errorf("error %v does not wrap ErrInvalidName", err)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %q does not contain %q", err, tc.wantErr)
				}
				if got != (Name{}) {
					t.Errorf("got %+v with the error, want zero Name", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Normalize(%q, %q): %v", tc.raw, tc.hint, err)
			}
			if got != tc.want {
				t.Fatalf("Normalize(%q, %q) = %+v, want %+v", tc.raw, tc.hint, got, tc.want)
			}
			if k := got.Key(); k != "gemini:"+tc.want.Canonical {
				t.Errorf("Key() = %q, want %q", k, "gemini:"+tc.want.Canonical)
			}
			checkStable(t, got)
		})
	}
}

// checkStable asserts the idempotency contract: re-normalizing the
// canonical or API name (with or without the kind) changes nothing.
func checkStable(t *testing.T, n Name) {
	t.Helper()
	for _, in := range []string{n.Canonical, n.APIName} {
		for _, hint := range []Kind{n.Kind, KindUnknown} {
			again, err := Normalize(in, hint)
			if err != nil {
				t.Errorf("Normalize(%q, %q) of a normalized name: %v", in, hint, err)
				continue
			}
			if again.Canonical != n.Canonical || again.Kind != n.Kind || again.ID != n.ID {
				t.Errorf("Normalize(%q, %q) = %+v, want canonical %q kind %q id %q", in, hint, again, n.Canonical, n.Kind, n.ID)
			}
		}
	}
	again, _ := Normalize(n.APIName, n.Kind)
	if again.APIName != n.APIName {
		t.Errorf("Normalize(APIName %q).APIName = %q, want it unchanged", n.APIName, again.APIName)
	}
}

// TestWebhookAndAPIFormsShareKey is the contract the service rests on: the
// webhook payload and the reconcile path must hit the same ledger document.
func TestWebhookAndAPIFormsShareKey(t *testing.T) {
	type form struct {
		raw  string
		hint Kind
	}
	groups := []struct {
		name    string
		key     string
		apiName string // most specific API name in the group
		forms   []form
	}{
		{
			name: "batch", key: "gemini:batches/batch_123456", apiName: "batches/batch_123456",
			forms: []form{
				{"batch_123456", KindBatch},
				{"batches/batch_123456", KindBatch},
				{"batches/batch_123456", KindUnknown},
				{"projects/p/locations/us-central1/batches/batch_123456", KindUnknown},
			},
		},
		{
			name: "video", key: "gemini:operations/abc", apiName: veoAPI,
			forms: []form{
				{"abc", KindVideo},
				{"operations/abc", KindVideo},
				{"operations/abc", KindUnknown},
				{veoAPI, KindUnknown},
				{veoAPI, KindVideo},
				{"projects/p/locations/us-central1/publishers/google/" + veoAPI, KindUnknown},
			},
		},
		{
			name: "interaction", key: "gemini:interactions/v1_Chd-x_y", apiName: "interactions/v1_Chd-x_y",
			forms: []form{
				{"v1_Chd-x_y", KindInteraction},
				{"interactions/v1_Chd-x_y", KindInteraction},
				{"interactions/v1_Chd-x_y", KindUnknown},
			},
		},
	}
	seen := map[string]string{}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			sawAPIName := false
			for _, f := range g.forms {
				n, err := Normalize(f.raw, f.hint)
				if err != nil {
					t.Fatalf("Normalize(%q, %q): %v", f.raw, f.hint, err)
				}
				if n.Key() != g.key {
					t.Errorf("Normalize(%q, %q).Key() = %q, want %q", f.raw, f.hint, n.Key(), g.key)
				}
				sawAPIName = sawAPIName || n.APIName == g.apiName
			}
			if !sawAPIName {
				t.Errorf("no form kept the API name %q", g.apiName)
			}
		})
		if other, dup := seen[g.key]; dup {
			t.Errorf("groups %q and %q share key %q", other, g.name, g.key)
		}
		seen[g.key] = g.name
	}

	// The same id in different families must stay distinct operations.
	keys := map[string]Kind{}
	for _, k := range []Kind{KindBatch, KindVideo, KindInteraction} {
		n, err := Normalize("same_id", k)
		if err != nil {
			t.Fatalf("Normalize(same_id, %q): %v", k, err)
		}
		if prev, dup := keys[n.Key()]; dup {
			t.Errorf("kinds %q and %q share key %q", prev, k, n.Key())
		}
		keys[n.Key()] = k
	}
}

// segmentRE is the documented id rule; validSegment must agree with it.
func segmentRE() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._~=+:@-]{0,254}$`)
}

func TestValidSegmentMatchesRegexp(t *testing.T) {
	re := segmentRE()
	var inputs []string
	for c := 0; c < 256; c++ {
		inputs = append(inputs, string([]byte{byte(c)}), "a"+string([]byte{byte(c)}), string([]byte{byte(c)})+"a")
	}
	inputs = append(inputs, "", ".", "..", "é", "aé", strings.Repeat("a", 255), strings.Repeat("a", 256), "a\n")
	for _, s := range inputs {
		if got, want := validSegment(s), re.MatchString(s); got != want {
			t.Errorf("validSegment(%q) = %v, regexp says %v", s, got, want)
		}
	}
}

func TestErrorMessageBounded(t *testing.T) {
	_, err := Normalize("files/"+strings.Repeat("x", 1000), KindUnknown)
	if err == nil {
		t.Fatal("want error for unknown prefix")
	}
	if len(err.Error()) > 400 {
		t.Errorf("error message is %d bytes, want it bounded: %.100q...", len(err.Error()), err)
	}
}

// TestCollections: each kind's collection is what Normalize gives its
// bare ids, and a bare id is looked for in every kind's names.
func TestCollections(t *testing.T) {
	for k, want := range map[Kind]string{KindBatch: "batches/", KindVideo: "operations/",
		KindInteraction: "interactions/", KindUnknown: ""} {
		if got := Collection(k); got != want {
			t.Errorf("Collection(%q) = %q, want %q", k, got, want)
		}
	}
	got := InEveryKind("batch_12")
	want := []string{"batches/batch_12", "operations/batch_12", "interactions/batch_12"}
	if !slices.Equal(got, want) {
		t.Errorf("InEveryKind(batch_12) = %q, want %q", got, want)
	}
}
