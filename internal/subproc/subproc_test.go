package subproc

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

const childEnv = "SUBPROC_TEST_CHILD"

// TestChild is both sides: run by go test it starts itself as a child that prints two lines
// and then blocks until it is killed.
func TestChild(t *testing.T) {
	if os.Getenv(childEnv) == "print-and-block" {
		fmt.Println("first")
		fmt.Println("ready")
		select {}
	}
	if os.Getenv(childEnv) == "exit" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := Start(t, "test", "^TestChild$", []string{childEnv + "=print-and-block"})
	c.Await(ctx, t, "ready")
	select {
	case <-c.Done():
		t.Fatal("the child exited on its own")
	default:
	}
	c.Kill(t)
	select {
	case <-c.Done():
	default:
		t.Fatal("Done is open after Kill")
	}
}

func TestAwaitFailsWhenTheChildExits(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := Start(t, "test", "^TestChild$", []string{childEnv + "=exit"})
	ft := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = recover() }()
		c.Await(ctx, ft, "never printed")
	}()
	<-done
	if ft.msg == "" {
		t.Fatal("Await returned without failing although the child exited")
	}
}

// fatalRecorder records Fatalf and stops the goroutine like testing does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic("fatal")
}
