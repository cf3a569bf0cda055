package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// tab is one headless Chromium tab of a console test: its steps fail the
// test with what was being done, and it closes when the test ends.
type tab struct {
	t   *testing.T
	ctx context.Context
}

// openTab starts Debian's chromium (browser) with a width×height window
// and a profile of its own; every step in it is bounded by two minutes.
func openTab(t *testing.T, browser string, width, height int) tab {
	t.Helper()
	alloc, cancel := chromedp.NewExecAllocator(t.Context(),
		chromedp.ExecPath(browser), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.WindowSize(width, height),
		chromedp.UserDataDir(t.TempDir()))
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel)
	return tab{t: t, ctx: ctx}
}

func (b tab) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

func (b tab) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(sel))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// shot saves a full-page screenshot as dir/name.png.
func (b tab) shot(dir, name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
}

// artifacts is where a test's screenshots go: $LROSINK_ARTIFACTS (the
// docs' screenshots are taken from there), else the test's temp dir.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LROSINK_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
