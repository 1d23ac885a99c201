package tools

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// SQLite is the sqlite tool set, modelled on mcp-server-sqlite: a database
// file in the workspace, read_query for SELECTs, write_query for
// everything else, create_table, list_tables and describe_table. Like the
// reference server it only looks at the first keyword: write_query accepts
// any statement that is not a SELECT (VACUUM INTO, ATTACH...), which the
// argument-visible cases abuse.
type SQLite struct {
	path string
	once sync.Once
	db   *sql.DB
	err  error
}

// NewSQLite returns the sqlite tools on the database file path (created on
// first use, so the server starts without touching it). The caller links
// the driver named "sqlite" (modernc.org/sqlite), so that servers without
// a database do not carry it.
func NewSQLite(path string) *SQLite { return &SQLite{path: path} }

// DB opens the database on first use.
func (s *SQLite) DB() (*sql.DB, error) {
	s.once.Do(func() {
		s.db, s.err = sql.Open("sqlite", s.path)
		if s.err == nil {
			s.db.SetMaxOpenConns(1)
			s.err = s.db.Ping()
		}
	})
	return s.db, s.err
}

// Tools returns the sqlite tool set.
func (s *SQLite) Tools() Set {
	return Set{
		{Tool: mcp.NewTool("read_query",
			mcp.WithDescription("Run a SELECT query on the SQLite database and return the rows as JSON."),
			mcp.WithString("query", mcp.Required(), mcp.Description("SELECT statement"))), Handler: s.read},
		{Tool: mcp.NewTool("write_query",
			mcp.WithDescription("Run an INSERT, UPDATE or DELETE (any non-SELECT statement) and return the number of affected rows."),
			mcp.WithString("query", mcp.Required(), mcp.Description("SQL statement"))), Handler: s.write},
		{Tool: mcp.NewTool("create_table",
			mcp.WithDescription("Create a table with a CREATE TABLE statement."),
			mcp.WithString("query", mcp.Required(), mcp.Description("CREATE TABLE statement"))), Handler: s.create},
		{Tool: mcp.NewTool("list_tables",
			mcp.WithDescription("List the tables of the database.")), Handler: s.listTables},
		{Tool: mcp.NewTool("describe_table",
			mcp.WithDescription("Show the columns of a table."),
			mcp.WithString("table_name", mcp.Required(), mcp.Description("Table name"))), Handler: s.describe},
	}
}

func firstWord(q string) string {
	f := strings.Fields(q)
	if len(f) == 0 {
		return ""
	}
	return strings.ToUpper(f[0])
}

// Rows runs a query and returns its rows as maps.
func (s *SQLite) Rows(ctx context.Context, q string, args ...any) ([]map[string]any, error) {
	db, err := s.DB()
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		m := map[string]any{}
		for i, c := range cols {
			if b, ok := vals[i].([]byte); ok {
				vals[i] = string(b)
			}
			m[c] = vals[i]
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

func (s *SQLite) rowsResult(ctx context.Context, q string, args ...any) *mcp.CallToolResult {
	rows, err := s.Rows(ctx, q, args...)
	if err != nil {
		return Errorf("query: %v", err)
	}
	b, _ := json.Marshal(rows)
	return Text(string(b))
}

func (s *SQLite) read(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	q, err := req.RequireString("query")
	if err != nil {
		return Errorf("%v", err), nil
	}
	if w := firstWord(q); w != "SELECT" && w != "WITH" {
		return Errorf("read_query only runs SELECT queries"), nil
	}
	return s.rowsResult(ctx, q), nil
}

func (s *SQLite) exec(ctx context.Context, q string) *mcp.CallToolResult {
	db, err := s.DB()
	if err != nil {
		return Errorf("open database: %v", err)
	}
	r, err := db.ExecContext(ctx, q)
	if err != nil {
		return Errorf("query: %v", err)
	}
	n, _ := r.RowsAffected()
	return Text(fmt.Sprintf("affected rows: %d", n))
}

func (s *SQLite) write(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	q, err := req.RequireString("query")
	if err != nil {
		return Errorf("%v", err), nil
	}
	if firstWord(q) == "SELECT" {
		return Errorf("write_query does not run SELECT queries; use read_query"), nil
	}
	return s.exec(ctx, q), nil
}

func (s *SQLite) create(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	q, err := req.RequireString("query")
	if err != nil {
		return Errorf("%v", err), nil
	}
	if f := strings.Fields(strings.ToUpper(q)); len(f) < 2 || f[0] != "CREATE" || f[1] != "TABLE" {
		return Errorf("create_table only runs CREATE TABLE statements"), nil
	}
	return s.exec(ctx, q), nil
}

func (s *SQLite) listTables(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return s.rowsResult(ctx, "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"), nil
}

func (s *SQLite) describe(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	t, err := req.RequireString("table_name")
	if err != nil {
		return Errorf("%v", err), nil
	}
	return s.rowsResult(ctx, "SELECT name, type, \"notnull\", pk FROM pragma_table_info(?)", t), nil
}
