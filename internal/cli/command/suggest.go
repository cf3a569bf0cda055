package command

import (
	"slices"
	"strings"
)

// Suggest is the candidate closest to typed, for a "did you mean" line:
// the one at the smallest edit distance (insertions, deletions,
// substitutions and transpositions of adjacent letters, case ignored),
// provided that distance is small for the word's length (at most 1 for
// words up to 4 letters, 2 up to 8, then 3) and no other candidate ties
// with it. A candidate that starts with typed wins outright (`lrosink
// serv`). "" when nothing is close enough to be a typo of.
//
// The one helper every "did you mean" of lrosink uses: unknown commands and
// subcommands, unknown flags, unknown event types of `lrosink send`.
func Suggest(typed string, candidates []string) string {
	typed = strings.ToLower(strings.TrimSpace(typed))
	if typed == "" {
		return ""
	}
	var prefixed []string
	for _, c := range candidates {
		if strings.HasPrefix(strings.ToLower(c), typed) {
			prefixed = append(prefixed, c)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	limit := 3
	switch n := len([]rune(typed)); {
	case n <= 4:
		limit = 1
	case n <= 8:
		limit = 2
	}
	best, bestD, tie := "", limit+1, false
	for _, c := range slices.Sorted(slices.Values(candidates)) {
		d := EditDistance(typed, strings.ToLower(c))
		switch {
		case d < bestD:
			best, bestD, tie = c, d, false
		case d == bestD && c != best:
			tie = true
		}
	}
	if best == "" || tie {
		return ""
	}
	return best
}

// EditDistance is the optimal string alignment distance between a and b:
// the fewest insertions, deletions, substitutions and swaps of two adjacent
// runes that turn a into b ("sned" → "send" is one swap).
func EditDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// d[i][j]: distance between ra[:i] and rb[:j]; three rows suffice.
	prev2, prev, cur := make([]int, len(rb)+1), make([]int, len(rb)+1), make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
