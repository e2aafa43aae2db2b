package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/mqb-dev/mqb/lsp"
)

func init() {
	register(&command{
		Name:    "lsp",
		Usage:   "mqbc lsp",
		Summary: "run the language server on stdin/stdout (diagnostics, hover with route verdicts, completion, definition, formatting)",
		Run:     runLSP,
	})
}

func runLSP(args []string, stdout, stderr io.Writer) int {
	c := commands["lsp"]
	fs := newFlags(c, stderr)
	// Editors pass --stdio by convention; stdio is the only transport.
	fs.Bool("stdio", true, "talk over stdin and stdout (the only transport)")
	if _, err := parseInterspersed(fs, args); err != nil {
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := lsp.Serve(ctx, stdio{os.Stdin, stdout}, stderr); err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "mqbc lsp: %v\n", err)
		return exitError
	}
	return exitOK
}

// stdio joins stdin and stdout into the one stream the server reads and
// writes.
type stdio struct {
	io.Reader
	io.Writer
}

func (stdio) Close() error { return nil }
