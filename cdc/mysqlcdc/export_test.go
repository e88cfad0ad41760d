package mysqlcdc

import "time"

// SetChunkDelay makes re-snapshot chunks wait d between their read and their watermark (the
// window in which streamed changes race a chunk's rows) until the returned func restores it.
func SetChunkDelay(d time.Duration) (restore func()) {
	old := chunkDelay.Swap(int64(d))
	return func() { chunkDelay.Store(old) }
}
