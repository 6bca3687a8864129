// Package spelling finds the setting or value a misspelt one was meant to
// be, for configuration errors that say "did you mean ...?".
package spelling

import "strings"

// Distance is the optimal string alignment distance of a and b (Levenshtein
// plus adjacent transpositions, so "secert" is one edit from "secret"),
// or limit when it is at least limit.
func Distance(a, b string, limit int) int {
	if d := len(a) - len(b); d >= limit || -d >= limit {
		return limit
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= limit {
			return limit
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return min(prev[len(b)], limit)
}

// Nearest returns the one of choices that s is within limit edits of,
// ignoring case, the nearest when several are; "" when none is.
func Nearest(s string, choices []string, limit int) string {
	lower := strings.ToLower(s)
	best, bestD := "", limit+1
	for _, c := range choices {
		if d := Distance(lower, strings.ToLower(c), bestD); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}
