package osc

import (
	"context"
	"sync"
	"time"
)

// Reply budgets keep the OSC server from amplifying UDP traffic towards
// a third party (a spoofed source address, or a victim's port given as
// /holo/replyPort): replies travel to a host that never asked for them
// when the source is forged, so they must not outweigh what came in.
//
//   - Per packet: the replies to one UDP packet (a bundle's messages,
//     now or at their moment) add up to at most the packet's size plus
//     Options.ReplyAllowance (1 KiB): a reply is bigger than a short
//     request, and a show controller must get its answers; a bundle of
//     many messages gets no more than it weighs (plus that allowance).
//   - Per source host: at most Options.ReplyRate replies a second (a
//     token bucket on the server's clock).
//
// TCP replies go back on the connection (a handshake proves the address)
// and are not budgeted.

type budgetKey struct{}

// packetBudget is what the replies to one packet may still send.
type packetBudget struct {
	mu   sync.Mutex
	left int
}

// withBudget returns ctx carrying the reply budget of a packet of n
// bytes.
func (s *Server) withBudget(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, budgetKey{}, &packetBudget{left: n + s.o.ReplyAllowance})
}

func (b *packetBudget) take(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.left {
		return false
	}
	b.left -= n
	return true
}

// rate is a token bucket of replies.
type rate struct {
	tokens float64
	at     time.Time
}

// allowReply takes n bytes of reply for host from ctx's packet budget and
// one reply from host's rate; it returns why not ("size", "rate") or "".
func (s *Server) allowReply(ctx context.Context, host string, n int) string {
	if b, ok := ctx.Value(budgetKey{}).(*packetBudget); ok && !b.take(n) {
		return "size"
	}
	now := s.clk.Now()
	per := float64(s.o.ReplyRate)
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rates[host]
	if r == nil {
		if len(s.rates) >= MaxClients {
			for h, old := range s.rates { // forget the hosts whose bucket is full again
				if old.tokens+now.Sub(old.at).Seconds()*per >= per {
					delete(s.rates, h)
				}
			}
		}
		if len(s.rates) >= MaxClients {
			host = "*" // too many hosts: the others share one bucket
			r = s.rates[host]
		}
		if r == nil {
			r = &rate{tokens: per, at: now}
			s.rates[host] = r
		}
	}
	r.tokens = min(per, r.tokens+now.Sub(r.at).Seconds()*per)
	r.at = now
	if r.tokens < 1 {
		return "rate"
	}
	r.tokens--
	return ""
}
