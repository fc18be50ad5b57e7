// Package console is the board's line console: the commands a person on
// the bench (or a script) types on the debug serial port, the simulator's
// stdin, a pty or a TCP socket.
//
// # Lines in
//
// One command a line; a line ends at LF, CR or CRLF and holds at most
// MaxLine bytes. Words are split at spaces and tabs; "..." quotes a word
// (\" and \\ inside), '...' quotes it as is. A line starting with # is a
// comment. --json anywhere on a line (or json on for the session) asks
// for machine output. There is no history and no line editing.
//
// # Lines out
//
//	holo> CMD ARGS            the prompt, then the line echoed (not on a
//	                          stdio terminal, which echoes by itself)
//	...                       the result for people: "key  value" lines or
//	                          a table, aligned with two or more spaces
//	{"...": ...}              or, with --json, one line of JSON: the API's
//	                          reply for commands that have an API form
//	ok                        the status line, always last:
//	error CODE: MESSAGE       CODE is the API's error code (bad_request,
//	                          not_found, busy, ...) or one of the console's
//	                          (unknown_command, bad_arguments,
//	                          not_available, no_rollback, restarting)
//
// A script waits for a line matching ^(ok|error [a-z0-9_]+: .*)$; result
// lines never match it (people's lines pad keys with two or more spaces,
// JSON starts with {). Blank lines and comments answer nothing but the
// next prompt. Output lines end in CRLF except on stdio (LF).
//
// # One implementation
//
// Every command that has an API form runs the API route's own handler
// (found with the HTTP server's Lookup, as the host link does), with the
// request's context marked by WithConsole, so effects, replies and events
// are those of HTTP. The console skips the HTTP rules of Host and password:
// whoever holds the serial port holds the board. ota update marks its
// PUT /ota/image with ota.WithSource so the session's source is console.
// Commands without an API form: touch on|off (Touch, valid until the next
// start), log level, json, help.
//
// The console outlives restarts in place: it reaches the boot running when
// a command is typed through Options.Target, waiting up to
// Options.RestartWait for a restarting board.
package console
