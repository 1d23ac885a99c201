package agentbound_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/configs"
	_ "github.com/mcpguard/mcpguard/internal/testenv"
	"github.com/mcpguard/mcpguard/lab/eval"
	"github.com/mcpguard/mcpguard/lab/servers"
)

// TestAgentBoundConformance runs the whole corpus under C-AB through the
// real proxy and servers, with the harness's oracles deciding each case,
// and checks case by case that the AgentBound-style manifest behaves as
// designed: it refuses a call of every argument-visible attack (and the
// attack does not happen) but those the case marks manifest_blind (an
// omitted argument, a secret, a path in an argument the manifest's
// vocabulary does not take for one), of which it refuses none; it refuses
// no call of an implementation-hidden attack (the arguments show nothing;
// whether the attack then happens is the oracle's business), and it refuses
// no benign call.
func TestAgentBoundConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole corpus (about 30 s); skipped with -short")
	}
	for _, bin := range []string{"node", "python3", "git"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("the corpus needs %s: %v", bin, err)
		}
	}
	ctx := context.Background()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	cases, err := eval.LoadCases(filepath.Join(root, "testdata/cases"), servers.Names())
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	binDir := t.TempDir()
	var names []string
	for _, c := range cases {
		names = append(names, c.Server)
	}
	require.NoError(t, servers.Build(ctx, binDir, names...))
	r := &eval.Runner{Root: root, BinDir: binDir, WorkDir: t.TempDir()}
	results, err := r.RunConfig(ctx, configs.CAB, cases, eval.DefaultParallel(), nil)
	if errors.Is(err, configs.ErrUnavailable) {
		t.Skipf("C-AB unavailable: %v", err)
	}
	require.NoError(t, err)
	var visible, visibleBlocked, blind, hidden, hiddenUntouched int
	for i, c := range cases {
		res := results[i]
		t.Run(c.ID, func(t *testing.T) {
			if res.Verdict == eval.Error {
				t.Fatalf("harness error: %s", res.Err)
			}
			denied := len(res.Denied) > 0
			switch {
			case c.Category == eval.Evasion:
				t.Logf("evasion case: verdict %s, denied calls %v", res.Verdict, res.Denied)
			case !c.Attack():
				if denied || res.Verdict != eval.Passed {
					t.Errorf("benign case: verdict %s, denied calls %v (%v)", res.Verdict, res.Denied, res.CallErrors)
				}
			case res.Visible && c.ManifestBlind != "":
				blind++
				if denied {
					t.Errorf("marked manifest_blind (%s) but C-AB refused calls %v: drop the note", c.ManifestBlind, res.Denied)
				}
				t.Logf("beyond the manifest (%s): verdict %s", c.ManifestBlind, res.Verdict)
			case res.Visible:
				visible++
				if !denied || res.Verdict != eval.Blocked {
					t.Errorf("argument-visible attack: verdict %s, denied calls %v; C-AB must refuse it", res.Verdict, res.Denied)
				} else {
					visibleBlocked++
				}
			default:
				hidden++
				if denied {
					t.Errorf("implementation-hidden attack: C-AB refused calls %v (%v); its arguments show nothing", res.Denied, res.CallErrors)
				} else {
					hiddenUntouched++
				}
				t.Logf("hidden attack passed the manifest; oracle verdict %s (%s)", res.Verdict, res.Detail)
			}
		})
	}
	t.Logf("C-AB: %d/%d argument-visible attacks refused (%d more beyond the manifest); %d/%d hidden attacks not seen",
		visibleBlocked, visible, blind, hiddenUntouched, hidden)
}
