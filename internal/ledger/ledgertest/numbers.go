package ledgertest

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
)

// RandomNumbers returns n JSON number literals of the kinds metadata carries
// and float64 cannot hold exactly: int64 and uint64 extremes and random
// values, decimals longer than 17 digits, floats in every notation. The
// same seed gives the same numbers.
func RandomNumbers(seed uint64, n int) []json.Number {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	fixed := []string{"1234567890123456789", "9007199254740993", "-9223372036854775808", "9223372036854775807",
		"18446744073709551615", "0", "-0", "0.1", "1e400", "-1.5E-400", "123456789012345678901234567890.000000000000000000001"}
	out := make([]json.Number, 0, n)
	for i := 0; len(out) < n; i++ {
		if i < len(fixed) {
			out = append(out, json.Number(fixed[i]))
			continue
		}
		var s string
		switch r.IntN(6) {
		case 0:
			s = strconv.FormatInt(r.Int64()-r.Int64(), 10)
		case 1:
			s = strconv.FormatUint(r.Uint64(), 10)
		case 2: // a big decimal
			b := new(big.Int).Lsh(big.NewInt(int64(r.Uint32())), uint(64+r.IntN(128)))
			s = b.String() + "." + strconv.FormatUint(r.Uint64(), 10)
		case 3:
			s = strconv.FormatFloat(math.Float64frombits(r.Uint64()&^(0x7ff<<52)|uint64(r.IntN(2046)+1)<<52), 'g', -1, 64)
		case 4: // more digits than a float64 keeps
			s = fmt.Sprintf("%d.%d", r.Int32(), r.Uint64())
		default:
			s = fmt.Sprintf("%de%d", r.Int64(), r.IntN(600)-300)
		}
		out = append(out, json.Number(s))
	}
	return out
}

// NumbersMetadata is metadata carrying nums as values, in a list and in a
// nested object, decoded from JSON text as a caller hands it to the ledger.
func NumbersMetadata(nums []json.Number) (map[string]any, string) {
	parts := make([]string, 0, len(nums)+2)
	list := make([]string, len(nums))
	for i, n := range nums {
		parts = append(parts, fmt.Sprintf("%q:%s", fmt.Sprintf("n%03d", i), n))
		list[i] = n.String()
	}
	parts = append(parts, `"list":[`+strings.Join(list, ",")+`]`, `"job":{"job_id":1234567890123456789}`)
	doc := "{" + strings.Join(parts, ",") + "}"
	m, err := ledger.DecodeMap([]byte(doc))
	if err != nil {
		panic(err)
	}
	return m, doc
}

// testNumbersExact: numbers in metadata and output come back with the exact
// literal they were given, whatever float64 would make of them, on the
// operation and in the claim's message (property test over random numbers).
func testNumbersExact(t *testing.T, s ledger.Ledger) {
	for i := range 8 {
		id := fmt.Sprintf("num%d", i)
		meta, doc := NumbersMetadata(RandomNumbers(uint64(i+1), 40))
		op := Op(id)
		op.UserMetadata, op.Output = meta, meta
		mustCommit(t, s, op, nil)
		got := mustGet(t, s, id)
		checkText(t, id+" metadata", got.UserMetadata, doc)
		checkText(t, id+" output", got.Output, doc)

		c := Claim(id, "h1", t0.Add(time.Minute))
		c.Message.UserMetadata, c.Message.Output = meta, meta
		mustCommit(t, s, terminal(got, t0.Add(time.Minute)), c)
		claim, err := s.GetClaim(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		checkText(t, id+" message metadata", claim.Message.UserMetadata, doc)
		checkText(t, id+" message output", claim.Message.Output, doc)
	}
}

// checkText fails unless m encodes to the same JSON as doc (keys sorted).
func checkText(t *testing.T, what string, m map[string]any, doc string) {
	t.Helper()
	want, err := ledger.DecodeMap([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	wb, _ := ledger.EncodeJSON(want)
	gb, err := ledger.EncodeJSON(m)
	if err != nil || string(gb) != string(wb) {
		t.Errorf("%s changed in the store (%v):\n got %s\nwant %s", what, err, gb, wb)
	}
}
