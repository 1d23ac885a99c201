package report

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
)

// Write draws every figure the inputs allow into dir, in the given
// formats, and writes the report with the same numbers twice: the
// Markdown summary (dir/summary.md) and the page to open (dir/index.html,
// the tables with their figures, readable from the file system without a
// server). It returns the files written.
func Write(in Inputs, dir string, formats []string) ([]string, error) {
	if len(formats) == 0 {
		formats = DefaultFormats()
	}
	files, err := drawFigures(in, dir, formats)
	if err != nil {
		return files, err
	}
	doc := Build(in)
	var md bytes.Buffer
	if err := doc.WriteMarkdown(&md); err != nil {
		return files, err
	}
	path := filepath.Join(dir, "summary.md")
	if err := writeFile(path, md.Bytes()); err != nil {
		return files, err
	}
	files = append(files, path)
	var page bytes.Buffer
	if err := doc.WriteHTML(&page, drawn(files)); err != nil {
		return files, err
	}
	path = filepath.Join(dir, "index.html")
	if err := writeFile(path, page.Bytes()); err != nil {
		return files, err
	}
	return append(files, path), nil
}

// drawFigures draws the figures of whatever the inputs hold.
func drawFigures(in Inputs, dir string, formats []string) ([]string, error) {
	var files []string
	add := func(f []string, err error) error {
		files = append(files, f...)
		return err
	}
	if in.Std != nil && in.CVM != nil {
		for _, d := range Dashboards(in.Std, in.CVM, in.AgentFilter) {
			if err := add(DashboardFigure(d, envLabel(in.Std), envLabel(in.CVM), in.Sample, dir, formats)); err != nil {
				return files, err
			}
		}
	}
	if in.Std != nil && in.CVM == nil {
		if err := add(AgentFigure(AgentRows(in.Std, in.AgentFilter), envLabel(in.Std), in.Sample, dir, formats)); err != nil {
			return files, err
		}
	}
	if in.Firewall != nil {
		if err := add(FirewallFigures(FirewallRows(in.Firewall), in.Sample, dir, formats)); err != nil {
			return files, err
		}
	}
	if len(in.Eval) > 0 {
		if err := add(SecurityFigures(in.Eval, in.Sample, dir, formats)); err != nil {
			return files, err
		}
	}
	if in.Guard != nil {
		if err := add(LatencyFigure(LatencyRows(in.Guard), in.Sample, dir, formats)); err != nil {
			return files, err
		}
	}
	return files, nil
}

// drawn maps each figure's base name to the formats written for it, in
// the order written.
func drawn(files []string) map[string][]string {
	m := map[string][]string{}
	for _, f := range files {
		ext := filepath.Ext(f)
		base := strings.TrimSuffix(filepath.Base(f), ext)
		if ext = strings.TrimPrefix(ext, "."); !slices.Contains(m[base], ext) {
			m[base] = append(m[base], ext)
		}
	}
	return m
}
