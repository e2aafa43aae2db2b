package objectstore

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// The object_store sink's premise (plan.PremisePutIfAbsent): the store
// refuses a second write of one name made with a does-not-exist
// precondition, and lists an object as soon as it is written. A bucket of
// Google Cloud Storage (ifGenerationMatch=0) and a directory (link(2)) do
// both by construction; an S3-compatible server may ignore If-None-Match
// (older servers answer 200 and replace the object), so an s3:// store is
// probed: an object written twice under one name, the second time
// expecting a 412, then found by a listing, then deleted.

// probePrefix starts the names of probe objects; the object_store source
// skips them, should one outlive its probe.
const probePrefix = ".mqb-probe-"

// withoutProbes drops probe objects from a listing.
func withoutProbes(keys []string) []string {
	return slices.DeleteFunc(keys, func(k string) bool { return strings.HasPrefix(k, probePrefix) })
}

func (s *objectSink) PremiseNode() string { return s.node }

func (s *objectSink) CheckPremise(ctx context.Context, p plan.Premise) error {
	if p.Kind != plan.PremisePutIfAbsent {
		return fmt.Errorf("the object_store sink cannot check a %s premise", p.Kind)
	}
	s3s, ok := s.opened.(*s3Store)
	if !ok {
		return nil // gs:// and file:// hold it by construction
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return probePutIfAbsent(ctx, s3s, s.log)
}

// probePutIfAbsent writes a probe object twice with If-None-Match: * and
// expects the second write refused, then lists it and deletes it.
func probePutIfAbsent(ctx context.Context, s *s3Store, log *slog.Logger) error {
	id, err := uuid.NewV7()
	if err != nil {
		return err
	}
	name := probePrefix + id.String()
	where := s.String() + name
	created, err := s.PutIfAbsent(ctx, name, []byte("mqb start-up probe: a second write of this name must be refused\n"), "text/plain")
	if err != nil {
		if s3Status(err) == http.StatusNotImplemented {
			return &runtime.PremiseFailure{
				Found: fmt.Sprintf("%s does not implement conditional writes (If-None-Match: * answered 501)", s),
				Fix:   s3PremiseFix,
			}
		}
		return fmt.Errorf("write probe object %s: %w", where, err)
	}
	if !created {
		return fmt.Errorf("write probe object %s: an object of that fresh name already exists", where)
	}
	defer func() {
		if err := s.delete(context.WithoutCancel(ctx), name); err != nil {
			// Harmless: the object_store source skips probe objects.
			log.Warn("object_store: could not delete the start-up probe object", "object", where, "err", plan.RedactURLs(err.Error()))
		}
	}()
	again, err := s.PutIfAbsent(ctx, name, []byte("second write\n"), "text/plain")
	if err != nil {
		return fmt.Errorf("write probe object %s again: %w", where, err)
	}
	if again {
		return &runtime.PremiseFailure{
			Found: fmt.Sprintf("%s accepted a second write of %s with If-None-Match: * and replaced it: the server ignores conditional writes", s, name),
			Fix:   s3PremiseFix,
		}
	}
	names, err := s.List(ctx, name)
	if err != nil {
		return fmt.Errorf("list probe object %s: %w", where, err)
	}
	if !slices.Contains(names, name) {
		return &runtime.PremiseFailure{
			Found: fmt.Sprintf("%s did not list %s right after it was written: its listing is not read-after-write consistent", s, name),
			Fix:   s3PremiseFix,
		}
	}
	return nil
}

const s3PremiseFix = "Use a store that honours If-None-Match: * on PutObject and lists what it wrote at once (AWS S3, a recent MinIO), or set name_by = write_time and let a key-addressed sink absorb repeats."
