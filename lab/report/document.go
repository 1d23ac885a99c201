package report

import (
	"fmt"
	"io"
	"strings"
)

// Document is the report's text, drawn once from the inputs and written
// twice: as Markdown (summary.md, the README's results) and as HTML
// (index.html, with the figures beside their tables). Both show the same
// numbers because they render the same cells.
type Document struct {
	Title string
	// Notes are the paragraphs under the title (what the data is, how the
	// intervals are computed).
	Notes []Para
	// Run describes the run that made the inputs (machine, commit, stage
	// times), as key: value lines; may be empty.
	Run      []RunLine
	Sections []Section
}

// Para is a paragraph; Lead, when set, is shown in bold before Text.
type Para struct{ Lead, Text string }

// Section is one heading with its figures, paragraphs and table.
type Section struct {
	// ID is the section's anchor in the HTML report.
	ID, Title string
	// Sub marks a subsection (### in Markdown, h3 in HTML).
	Sub bool
	// Before and After are paragraphs around the table.
	Before, After []Para
	Table         *Table
	// Figures are the base names of the figures drawn for this section
	// (the files are base.png, base.svg, ... in the report's directory).
	Figures []Figure
}

// Figure is a drawn figure and what it shows.
type Figure struct{ Base, Caption string }

// Table is a table of formatted cells; Right marks the columns aligned
// to the right (numbers).
type Table struct {
	Head  []string
	Right []bool
	Rows  [][]string
}

// newTable returns a table with the given head; a column whose name ends
// in ! is a number column (aligned right), the ! dropped.
func newTable(head ...string) *Table {
	t := &Table{}
	for _, h := range head {
		name, num := strings.CutSuffix(h, "!")
		t.Head = append(t.Head, name)
		t.Right = append(t.Right, num)
	}
	return t
}

func (t *Table) add(cells ...string) { t.Rows = append(t.Rows, cells) }

// WriteMarkdown writes the document as GitHub-flavoured Markdown.
func (d *Document) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", d.Title)
	for _, p := range d.Notes {
		b.WriteString("\n" + p.markdown() + "\n")
	}
	if len(d.Run) > 0 {
		b.WriteString("\n")
		for _, l := range d.Run {
			fmt.Fprintf(&b, "- %s: %s\n", l.Key, l.Value)
		}
	}
	for _, s := range d.Sections {
		h := "##"
		if s.Sub {
			h = "###"
		}
		fmt.Fprintf(&b, "\n%s %s\n", h, s.Title)
		for _, p := range s.Before {
			b.WriteString("\n" + p.markdown() + "\n")
		}
		if s.Table != nil {
			b.WriteString("\n")
			s.Table.markdown(&b)
		}
		for _, p := range s.After {
			b.WriteString("\n" + p.markdown() + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (p Para) markdown() string {
	if p.Lead == "" {
		return p.Text
	}
	return "**" + p.Lead + "**" + p.Text
}

func (t *Table) markdown(b *strings.Builder) {
	b.WriteString("|")
	for _, h := range t.Head {
		b.WriteString(" " + h + " |")
	}
	b.WriteString("\n|")
	for _, r := range t.Right {
		if r {
			b.WriteString("---:|")
		} else {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for _, row := range t.Rows {
		b.WriteString("|")
		for _, c := range row {
			if c == "" {
				b.WriteString(" |")
				continue
			}
			b.WriteString(" " + c + " |")
		}
		b.WriteString("\n")
	}
}
