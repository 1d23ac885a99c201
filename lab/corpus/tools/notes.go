package tools

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// The synthetic notes every notes server starts with (generated once, 180
// of them; each file is one Note).
//
//go:embed fixtures/notes/*.json
var noteFixtures embed.FS

// Note is one note of the notes server.
type Note struct {
	ID      string   `json:"id"`
	Title   string   `json:"title"`
	Body    string   `json:"body"`
	Tags    []string `json:"tags"`
	Created string   `json:"created"`
}

func (n Note) validate() error {
	switch {
	case n.ID == "":
		return errors.New("note has no id")
	case n.Title == "":
		return fmt.Errorf("note %s has no title", n.ID)
	case n.Body == "":
		return fmt.Errorf("note %s has no body", n.ID)
	}
	if _, err := time.Parse(time.RFC3339, n.Created); err != nil {
		return fmt.Errorf("note %s: created: %w", n.ID, err)
	}
	return nil
}

// FixtureNotes returns the embedded notes, validated, sorted by id.
func FixtureNotes() ([]Note, error) { return loadNotes(noteFixtures, "fixtures/notes") }

func loadNotes(fsys fs.FS, dir string) ([]Note, error) {
	ents, err := fs.ReadDir(fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var notes []Note
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		var n Note
		if err := json.Unmarshal(b, &n); err != nil {
			return nil, fmt.Errorf("note %s: %w", e.Name(), err)
		}
		if err := n.validate(); err != nil {
			return nil, fmt.Errorf("note %s: %w", e.Name(), err)
		}
		notes = append(notes, n)
	}
	slices.SortFunc(notes, func(a, b Note) int { return strings.Compare(a.ID, b.ID) })
	return notes, nil
}

// Notes is the notes tool set: the embedded fixtures plus the notes added
// in the workspace (WS/notes/<id>.json).
type Notes struct {
	fixtures []Note
	dir      string
}

// NewNotes returns the notes tools storing new notes under ws/notes.
func NewNotes(ws string) (*Notes, error) {
	if ws == "" {
		return nil, ErrNoWorkspace
	}
	fx, err := FixtureNotes()
	if err != nil {
		return nil, fmt.Errorf("load fixtures: %w", err)
	}
	return &Notes{fixtures: fx, dir: filepath.Join(ws, "notes")}, nil
}

// All returns every note: fixtures, then the workspace's own.
func (n *Notes) All() ([]Note, error) {
	own, err := loadNotes(os.DirFS(n.dir), ".")
	if err != nil {
		return nil, fmt.Errorf("workspace notes: %w", err)
	}
	return append(slices.Clone(n.fixtures), own...), nil
}

// Tools returns the notes tool set.
func (n *Notes) Tools() Set {
	return Set{
		{Tool: mcp.NewTool("list_notes",
			mcp.WithDescription("List notes as `id: title [tags]`, optionally only those with a tag."),
			mcp.WithString("tag", mcp.Description("Only notes carrying this tag"))), Handler: n.list},
		{Tool: mcp.NewTool("get_note",
			mcp.WithDescription("Return one note as JSON."),
			mcp.WithString("id", mcp.Required(), mcp.Description("Note id, e.g. n042"))), Handler: n.get},
		{Tool: mcp.NewTool("search_notes",
			mcp.WithDescription("Case-insensitive full-text search over note titles, bodies and tags; returns `id: title` lines."),
			mcp.WithString("query", mcp.Required(), mcp.Description("Text to look for"))), Handler: n.search},
		{Tool: mcp.NewTool("add_note",
			mcp.WithDescription("Add a note to the workspace and return its id."),
			mcp.WithString("title", mcp.Required(), mcp.Description("Title")),
			mcp.WithString("body", mcp.Required(), mcp.Description("Text of the note")),
			mcp.WithArray("tags", mcp.WithStringItems(), mcp.Description("Tags"))), Handler: n.add},
	}
}

func noteLine(x Note) string {
	return fmt.Sprintf("%s: %s [%s]", x.ID, x.Title, strings.Join(x.Tags, ","))
}

func (n *Notes) list(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	all, err := n.All()
	if err != nil {
		return Errorf("%v", err), nil
	}
	tag := req.GetString("tag", "")
	var b strings.Builder
	count := 0
	for _, x := range all {
		if tag != "" && !slices.Contains(x.Tags, tag) {
			continue
		}
		count++
		b.WriteString(noteLine(x) + "\n")
	}
	fmt.Fprintf(&b, "(%d notes)\n", count)
	return Text(b.String()), nil
}

func (n *Notes) get(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id, err := req.RequireString("id")
	if err != nil {
		return Errorf("%v", err), nil
	}
	all, err := n.All()
	if err != nil {
		return Errorf("%v", err), nil
	}
	for _, x := range all {
		if x.ID == id {
			b, _ := json.MarshalIndent(x, "", "  ")
			return Text(string(b)), nil
		}
	}
	return Errorf("no note %q", id), nil
}

func (n *Notes) search(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	q, err := req.RequireString("query")
	if err != nil {
		return Errorf("%v", err), nil
	}
	all, err := n.All()
	if err != nil {
		return Errorf("%v", err), nil
	}
	q = strings.ToLower(q)
	var b strings.Builder
	count := 0
	for _, x := range all {
		hay := strings.ToLower(x.Title + "\n" + x.Body + "\n" + strings.Join(x.Tags, " "))
		if strings.Contains(hay, q) {
			count++
			b.WriteString(noteLine(x) + "\n")
		}
	}
	fmt.Fprintf(&b, "(%d matches)\n", count)
	return Text(b.String()), nil
}

func (n *Notes) add(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	title, err := req.RequireString("title")
	if err != nil {
		return Errorf("%v", err), nil
	}
	body, err := req.RequireString("body")
	if err != nil {
		return Errorf("%v", err), nil
	}
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return Errorf("add note: %v", err), nil
	}
	own, err := loadNotes(os.DirFS(n.dir), ".")
	if err != nil {
		return Errorf("%v", err), nil
	}
	x := Note{
		ID:      fmt.Sprintf("w%03d", len(own)+1),
		Title:   title,
		Body:    body,
		Tags:    req.GetStringSlice("tags", nil),
		Created: time.Now().UTC().Format(time.RFC3339),
	}
	b, _ := json.MarshalIndent(x, "", "  ")
	p := filepath.Join(n.dir, x.ID+".json")
	if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
		return Errorf("add note: %v", err), nil
	}
	return Text(fmt.Sprintf("Added note %s (%s)", x.ID, p)), nil
}
