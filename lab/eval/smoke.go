package eval

import "sort"

// SmokeSize is how many cases the smoke subset holds at most.
const SmokeSize = 6

// Smoke picks the smoke subset (`go test -short`, `mcpguard eval --smoke`):
// the cases of one server, a handful of them. The server is the one with
// the most cases among those that have both attack and benign cases (so
// the subset can show a false positive as well as a block), else the one
// with the most cases; ties go to the first name. Within the server, one
// benign case is kept and the rest are attacks, in ID order.
func Smoke(cases []*Case) []*Case {
	type stats struct{ attacks, benign int }
	by := map[string]*stats{}
	var names []string
	for _, c := range cases {
		s, ok := by[c.Server]
		if !ok {
			s = &stats{}
			by[c.Server] = s
			names = append(names, c.Server)
		}
		if c.Attack() {
			s.attacks++
		} else {
			s.benign++
		}
	}
	sort.Strings(names)
	best, bestMixed := "", false
	for _, n := range names {
		s := by[n]
		mixed := s.attacks > 0 && s.benign > 0
		total := s.attacks + s.benign
		switch {
		case best == "":
		case mixed && !bestMixed:
		case mixed == bestMixed && total > by[best].attacks+by[best].benign:
		default:
			continue
		}
		best, bestMixed = n, mixed
	}
	var out []*Case
	benignTaken := false
	for _, c := range cases {
		if c.Server != best || len(out) >= SmokeSize {
			continue
		}
		if !c.Attack() {
			if benignTaken {
				continue
			}
			benignTaken = true
		}
		out = append(out, c)
	}
	return out
}
