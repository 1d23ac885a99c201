package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"slices"
)

//go:embed index.html.tmpl
var pageTemplate string

var page = template.Must(template.New("index.html").Parse(pageTemplate))

// htmlFigure is a figure as the page shows it: the image to show (PNG
// when drawn, else SVG) and a link to every format written.
type htmlFigure struct {
	Base, Caption, Src string
	Links              []string
}

type htmlCell struct {
	Text string
	Num  bool
}

type htmlSection struct {
	Section
	Shown      []htmlFigure
	Head       []htmlCell
	Rows       [][]htmlCell
	TableShown bool
}

// WriteHTML writes the document as one HTML page that shows each
// section's figures from drawn (base name to the formats written beside
// the page) above its table. The page has no script and loads nothing but
// those files, so it reads the same from the file system as from a server.
func (d *Document) WriteHTML(w io.Writer, drawn map[string][]string) error {
	var ss []htmlSection
	for _, s := range d.Sections {
		hs := htmlSection{Section: s}
		for _, f := range s.Figures {
			if fig, ok := showFigure(f, drawn[f.Base]); ok {
				hs.Shown = append(hs.Shown, fig)
			}
		}
		if t := s.Table; t != nil {
			hs.TableShown = true
			for i, h := range t.Head {
				hs.Head = append(hs.Head, htmlCell{h, t.Right[i]})
			}
			for _, row := range t.Rows {
				var cells []htmlCell
				for i, c := range row {
					cells = append(cells, htmlCell{c, i < len(t.Right) && t.Right[i]})
				}
				hs.Rows = append(hs.Rows, cells)
			}
		}
		ss = append(ss, hs)
	}
	err := page.Execute(w, struct {
		*Document
		Sections []htmlSection
	}{d, ss})
	if err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	return nil
}

// showFigure picks the image a browser shows for a figure written in
// formats; false when none was drawn in a format it shows.
func showFigure(f Figure, formats []string) (htmlFigure, bool) {
	fig := htmlFigure{Base: f.Base, Caption: f.Caption}
	for _, ext := range []string{"png", "svg"} {
		if slices.Contains(formats, ext) {
			fig.Src = f.Base + "." + ext
			break
		}
	}
	for _, ext := range formats {
		fig.Links = append(fig.Links, f.Base+"."+ext)
	}
	return fig, fig.Src != ""
}
