package kafkaqueue

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-dev/tributary/queue"
)

func TestKindOf(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	cases := []struct {
		err  error
		want queue.Kind
	}{
		{kerr.UnknownTopicOrPartition, queue.NotFound},
		{fmt.Errorf("produce: %w", kerr.UnknownTopicOrPartition), queue.NotFound},
		{kerr.MessageTooLarge, queue.Invalid},
		{kerr.RecordListTooLarge, queue.Invalid},
		{kerr.SaslAuthenticationFailed, queue.Denied},
		{kerr.TopicAuthorizationFailed, queue.Denied},
		{kerr.GroupAuthorizationFailed, queue.Denied},
		{fmt.Errorf("tls: %w", x509.UnknownAuthorityError{}), queue.Denied},
		{refused, queue.Unavailable},
		{kgo.ErrRecordTimeout, queue.Unavailable},
		{kerr.NotEnoughReplicas, queue.Unavailable},
		{kerr.RequestTimedOut, queue.Unavailable},
		{kerr.RebalanceInProgress, queue.Unavailable},
		{errors.New("something else"), queue.Internal},
	}
	for _, c := range cases {
		err := classify("topic-name", c.err)
		if got := queue.KindOf(err); got != c.want {
			t.Errorf("classify(%v) is %v, want %v", c.err, got, c.want)
		}
		if !errors.Is(err, c.err) {
			t.Errorf("classify(%v) lost the cause", c.err)
		}
	}
	for _, ctxErr := range []error{context.Canceled, context.DeadlineExceeded} {
		if got := classify("t", fmt.Errorf("poll: %w", ctxErr)); got != ctxErr {
			t.Errorf("classify of a wrapped %v = %v, want it bare", ctxErr, got)
		}
	}
	if got := classify("t", kgo.ErrClientClosed); got != queue.ErrClosed {
		t.Errorf("classify(ErrClientClosed) = %v, want queue.ErrClosed", got)
	}
}
