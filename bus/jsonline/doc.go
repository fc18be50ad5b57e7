// Package jsonline reads and writes the text form of the host link: one
// request, reply or event per line, on UART or RS485.
//
// # Lines
//
// Every line ends with a line feed; a carriage return just before it is
// dropped, and a line with nothing else on it is skipped. A request line is
// at most [MaxLine] bytes counting the line feed, and every line is UTF-8.
//
//	request  [@addr ][#tag ]METHOD path[ body]     host to board
//	reply    [@addr ][#tag ]status[ +pending][ body]  board to host
//	event    ! body                                   board to host
//
//	@addr    @5 one board (1-223), @g2 a group (1-31), @* every board;
//	         a reply carries the answering board's own address
//	#tag     1-16 of A-Z a-z 0-9 _ -, copied from request to reply
//	METHOD   GET PUT POST PATCH DELETE, in capitals
//	path     an API path such as /leds or /scenes/scene?name=intro; a
//	         leading /api/v1 is accepted and removed
//	body     a JSON object on the same line (replies: an object or array)
//	status   three-digit HTTP status; 204 never has a body
//	+pending happenings not yet given to the host, written only when > 0
//
// Parts are separated by one space when written; the parsers also accept
// several. Examples:
//
//	GET /info
//	@3 #a1 PATCH /leds {"brightness":20}
//	@3 #a1 200 +2 {"mode":"solid","brightness":20}
//	! {"event":"touch","action":"down","x":10,"y":200,"seq":7,"t_ms":5120}
//
// # Errors
//
// A request the board cannot take is answered on one line with a status
// and an {"error","message"} body: [ErrBadRequest] (400, a line without
// method or path, a bad address or tag, a body that is not a JSON object),
// [ErrNotFound] (404, a method or path not served over the link, see
// [Served]) and [ErrTooLarge] (413, a line over [MaxLine]). These are the
// board API's own error values (package firmware/api), so the reply line
// carries the same status and body as HTTP would. [ErrorReply] builds that
// reply, keeping the address and tag when they could be read.
//
// # Memory
//
// Parsers do not copy bodies: Request.Body, Reply.Body and the event body
// alias the line given to them, so a caller that reuses its line buffer
// copies the body first. Tags and paths are strings; a path the link serves
// and that carries no query costs no allocation.
package jsonline
