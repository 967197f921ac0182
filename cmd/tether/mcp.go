package main

import (
	"context"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tetherdev/tether/sandbox/runmcp"
)

// mcpCmd is `tether mcp`: the MCP server of an agent-to-agent run's tools,
// on its standard input and output, which the agent's CLI starts inside
// the session's sandbox (package runmcp). It reaches the run through the
// sandbox bridge, at the address and with the token of the environment the
// bridge gave the CLI.
func mcpCmd(ctx context.Context, _, env []string, _, stderr io.Writer) int {
	e := envMap(env)
	addr, token := e[runmcp.EnvAddr], e[runmcp.EnvToken]
	if addr == "" || token == "" {
		fmt.Fprintf(stderr, "tether mcp: %s and %s are not set: this command runs inside a session's sandbox, started by its agent\n", runmcp.EnvAddr, runmcp.EnvToken)
		return 2
	}
	c, err := runmcp.Dial(ctx, addr, token)
	if err != nil {
		fmt.Fprintln(stderr, "tether mcp:", err)
		return 1
	}
	defer func() { _ = c.Close() }() // the relay connection of a command that ends: nothing to tell
	if err := runmcp.NewServer(c, version).Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		fmt.Fprintln(stderr, "tether mcp:", err)
		return 1
	}
	return 0
}
