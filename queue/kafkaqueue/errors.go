package kafkaqueue

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-dev/tributary/queue"
)

// classify turns a franz-go error into the port's vocabulary: context errors come back as
// the bare context error, a closed client as queue.ErrClosed, anything else as a *queue.Error
// naming the topic and keeping the cause reachable with errors.As.
func classify(topic string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled):
		return context.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return context.DeadlineExceeded
	case errors.Is(err, kgo.ErrClientClosed):
		return queue.ErrClosed
	}
	return &queue.Error{Kind: kindOf(err), Queue: topic, Err: err}
}

func kindOf(err error) queue.Kind {
	var (
		certErr     *tls.CertificateVerificationError
		unknownAuth x509.UnknownAuthorityError
		hostErr     x509.HostnameError
		invalidCert x509.CertificateInvalidError
		netErr      net.Error
	)
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID):
		return queue.NotFound
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge),
		errors.Is(err, kerr.InvalidRecord), errors.Is(err, kerr.CorruptMessage),
		errors.Is(err, kerr.InvalidTopicException), errors.Is(err, kerr.InvalidPartitions),
		errors.Is(err, kerr.InvalidReplicationFactor), errors.Is(err, kerr.InvalidConfig),
		errors.Is(err, kerr.PolicyViolation), errors.Is(err, kerr.InvalidRequiredAcks),
		errors.Is(err, kerr.InvalidSessionTimeout),
		errors.Is(err, kerr.UnsupportedVersion), errors.Is(err, kerr.UnsupportedForMessageFormat):
		return queue.Invalid
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.UnsupportedSaslMechanism),
		errors.Is(err, kerr.IllegalSaslState), errors.Is(err, kerr.TopicAuthorizationFailed),
		errors.Is(err, kerr.GroupAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed),
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed),
		errors.As(err, &certErr), errors.As(err, &unknownAuth), errors.As(err, &hostErr), errors.As(err, &invalidCert):
		return queue.Denied
	case kerr.IsRetriable(err),
		errors.Is(err, kgo.ErrRecordTimeout), errors.Is(err, kgo.ErrRecordRetries),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.As(err, new(*kgo.ErrFirstReadEOF)), errors.As(err, &netErr),
		// The group moved on while a commit was in flight; a later commit or the next owner
		// takes over, so the caller may retry.
		errors.Is(err, kerr.RebalanceInProgress), errors.Is(err, kerr.IllegalGeneration),
		errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.FencedInstanceID):
		return queue.Unavailable
	}
	return queue.Internal
}
