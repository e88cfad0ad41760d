package kafkaqueue

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// slogLogger passes franz-go's log lines to a *slog.Logger. Debug lines are not asked for:
// franz-go logs every request at that level.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (s slogLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lv := slog.LevelInfo
	switch level {
	case kgo.LogLevelError:
		lv = slog.LevelError
	case kgo.LogLevelWarn:
		lv = slog.LevelWarn
	case kgo.LogLevelDebug:
		lv = slog.LevelDebug
	}
	s.l.Log(context.Background(), lv, msg, keyvals...)
}
