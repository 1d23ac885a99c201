package report_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/lab/report"
)

// chromium is the browser the report is checked in: $MCPGUARD_CHROMIUM,
// else Debian's chromium (scripts/deps.sh installs it) on PATH.
func chromium() string {
	if p := os.Getenv("MCPGUARD_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// pageFigure is what the page says about one figure after loading.
type pageFigure struct {
	Base   string `json:"base"`
	Src    string `json:"src"`
	Loaded bool   `json:"loaded"`
	Width  int    `json:"width"`
}

// TestReportInBrowser opens the report drawn from the samples
// (index.html, from the file system as a reader would) in headless
// Chromium and checks that it loads without a console error, an uncaught
// exception or a failed load, that every figure the report lays out is on
// the page and decoded by the browser, and that every table is there.
// MCPGUARD_REPORT_SCREENSHOT=FILE.png keeps a screenshot of the whole page.
func TestReportInBrowser(t *testing.T) {
	bin := chromium()
	if bin == "" {
		t.Skip("no chromium on PATH (scripts/deps.sh installs Debian's chromium; MCPGUARD_CHROMIUM names another): the report's browser check needs a real browser")
	}
	in := sampleInputs(t)
	dir := t.TempDir()
	// PNG only: the page shows PNGs, and the other formats are
	// TestReportGolden's (drawing them all twice doubled this test's time
	// under the race detector).
	files, err := report.Write(in, dir, []string{"png"})
	require.NoError(t, err)
	page := filepath.Join(dir, "index.html")
	require.Contains(t, files, page)

	doc := report.Build(in)
	var want []string
	tables := 0
	for _, s := range doc.Sections {
		for _, f := range s.Figures {
			want = append(want, f.Base)
		}
		if s.Table != nil {
			tables++
		}
	}
	require.NotEmpty(t, want)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The flags that work on these machines (root, no GPU, a closed
	// network): no sandbox, no background connections.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 900))
	actx, cancelA := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()

	problems := watchProblems(t, bctx)
	_, err = chromedp.Call(bctx, cdplog.Enable, cdp.Empty{})
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate("file://"+page), chromedp.WaitReady(chromedp.CSS("footer"))))
	// Every image decoded (or failed) before looking.
	_, err = chromedp.Run(bctx, chromedp.Poll[bool](`[...document.images].every(i => i.complete)`, chromedp.WithPollingTimeout(time.Minute)))
	require.NoError(t, err)
	figs, err := chromedp.Run(bctx, chromedp.Evaluate[[]pageFigure](`[...document.querySelectorAll('figure[data-figure]')].map(f => {
		const i = f.querySelector('img');
		return {base: f.dataset.figure, src: i ? i.getAttribute('src') : '', loaded: !!i && i.complete && i.naturalWidth > 0, width: i ? i.naturalWidth : 0};
	})`))
	require.NoError(t, err)
	nTables, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('main table').length`))
	require.NoError(t, err)
	title, err := chromedp.Run(bctx, chromedp.Title())
	require.NoError(t, err)
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(90))
	require.NoError(t, err)
	if p := os.Getenv("MCPGUARD_REPORT_SCREENSHOT"); p != "" {
		require.NoError(t, os.WriteFile(p, shot, 0o644))
	}
	assert.Empty(t, problems(), "the page loads cleanly")
	assert.Equal(t, "mcpguard report", title)
	assert.Equal(t, tables, nTables, "every table is on the page")
	got := map[string]pageFigure{}
	for _, f := range figs {
		got[f.Base] = f
	}
	for _, base := range want {
		f, ok := got[base]
		if assert.True(t, ok, "figure %s is on the page (got %v)", base, figs) {
			assert.True(t, f.Loaded, "figure %s (%s) loaded", base, f.Src)
			assert.Greater(t, f.Width, 300, "figure %s is a real image", base)
		}
	}
	assert.Len(t, figs, len(want), "no figure the report does not lay out")
	assert.Greater(t, len(shot), 10000, "the screenshot shows something")
}

// watchProblems collects, from now on, the page's console errors and
// failed assertions, uncaught exceptions and error log entries (a file that
// failed to load); the func returns them.
func watchProblems(t *testing.T, bctx context.Context) func() []string {
	var mu sync.Mutex
	var problems []string
	require.NoError(t, chromedp.Listen(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				problems = append(problems, "console "+string(ev.Type)+": "+consoleText(ev.Args))
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			text := d.Text
			if d.Exception != nil {
				text += " " + d.Exception.Description
			}
			problems = append(problems, "exception: "+text)
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError {
				problems = append(problems, "log "+string(ev.Entry.Source)+": "+ev.Entry.Text+" "+ev.Entry.URL)
			}
		}
	}))
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(problems)
	}
}

func consoleText(args []*runtime.RemoteObject) string {
	var parts []string
	for _, a := range args {
		if a.Value != nil {
			parts = append(parts, string(a.Value))
		} else {
			parts = append(parts, a.Description)
		}
	}
	return strings.Join(parts, " ")
}
