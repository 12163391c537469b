package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FetchError returns the first fetch error other than the poll's own
// cancellation or deadline.
func FetchError(fetches kgo.Fetches) error {
	for _, fe := range fetches.Errors() {
		if errors.Is(fe.Err, context.Canceled) || errors.Is(fe.Err, context.DeadlineExceeded) {
			continue
		}
		return fmt.Errorf("partition %d: %w", fe.Partition, fe.Err)
	}
	return nil
}

// WithMessage appends the broker's optional error message, if any (nil err
// stays nil).
func WithMessage(err error, msg string) error {
	if err == nil || msg == "" {
		return err
	}
	return fmt.Errorf("%w (%s)", err, msg)
}
