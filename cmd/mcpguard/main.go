// Command mcpguard guards MCP tool calls and profiles LLM agents.
//
// Run `mcpguard help` for the list of subcommands, and
// `mcpguard <subcommand> -h` for the flags of one.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// stdio is what a subcommand reads from and writes to; tests give their own.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, io stdio, args []string) error
}

func commands() []command {
	return []command{
		{"run", "run an MCP server behind the guard, speaking MCP on stdin/stdout", cmdRun},
		{"gateway", "serve guarded servers over Streamable HTTP (docs/gateway.md)", cmdGateway},
		{"call", "make one tool call through the guard and print the result", cmdCall},
		{"eval", "run the case corpus and print the APR / V-APR / FPR table", cmdEval},
		{"clients", "list the MCP clients' configurations and their servers", cmdClients},
		{"wrap", "put mcpguard in front of the servers of the MCP clients' configurations", cmdWrap},
		{"unwrap", "restore the configurations wrap changed, byte for byte", cmdUnwrap},
		{"scan", "list the configured servers' tools, prompts and resources (confined) and judge them", cmdScan},
		{"audit", "read the audit log: denials by server and rule, what would allow each, --follow", cmdAudit},
		{"policy", "derive a starting policy from a server, or an override from an audit event", cmdPolicy},
		{"vm", "run a command as root in a VM whose kernel enforces BPF LSM", cmdVM},
		{"report", "draw figures and tables from benchmark and eval output", cmdReport},
		{"gate", "fail when a benchmark got significantly worse than a baseline", cmdGate},
		{"serve-llm", "serve the embedded reference model over the OpenAI API", cmdServeLLM},
	}
}

// exitCode is an error that carries the process exit status to use.
type exitCode struct {
	code int
	err  error
}

func (e *exitCode) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitCode) Unwrap() error { return e.err }

// errUsage marks an error in how the command was called (exit status 2).
var errUsage = errors.New("usage")

func main() {
	if len(os.Args) > 1 && os.Args[1] == "run" {
		spareProc()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, stdio{os.Stdin, os.Stdout, os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, s stdio, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(s.err)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, s, args[1:])
		var ec *exitCode
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, &ec):
			if ec.err != nil {
				fmt.Fprintf(s.err, "mcpguard %s: %v\n", c.name, ec.err)
			}
			return ec.code
		case errors.Is(err, errUsage):
			fmt.Fprintf(s.err, "mcpguard %s: %v\n", c.name, err)
			return 2
		default:
			fmt.Fprintf(s.err, "mcpguard %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(s.err, "mcpguard: unknown command %q\n\n", args[0])
	usage(s.err)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "mcpguard guards MCP tool calls and profiles LLM agents.")
	fmt.Fprintln(w, "\nUsage: mcpguard <command> [flags] [-- CMD ARGS...]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'mcpguard <command> -h' for a command's flags.")
}

// newFlags returns a FlagSet whose -h prints a usage line, the description and the flags.
func newFlags(s stdio, name, synopsis, desc string) *flag.FlagSet {
	fs := flag.NewFlagSet("mcpguard "+name, flag.ContinueOnError)
	fs.SetOutput(s.err)
	fs.Usage = func() {
		fmt.Fprintf(s.err, "Usage: mcpguard %s %s\n\n%s\n\nFlags:\n", name, synopsis, desc)
		fs.PrintDefaults()
	}
	return fs
}

// splitDashes splits args at the first "--": flags before, command after.
func splitDashes(args []string) (flags, cmd []string) {
	for i, a := range args {
		if a == "--" {
			return args[:i], args[i+1:]
		}
	}
	return args, nil
}
