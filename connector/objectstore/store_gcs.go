package objectstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
)

// gcsStore is an object store over a Google Cloud Storage bucket and
// prefix (gs://bucket/prefix). The client takes Application Default
// Credentials, or talks to an emulator without credentials when
// STORAGE_EMULATOR_HOST is set. A put is one request under the final name
// with a does-not-exist precondition: the request is the commit, and a 412
// means an earlier write of the same name already committed.
type gcsStore struct {
	client *storage.Client
	bucket *storage.BucketHandle
	name   string // bucket
	prefix string // "" or "dir/" under which names live
}

func openGCSStore(ctx context.Context, bucket, prefix string) (*gcsStore, error) {
	c, err := storage.NewClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("gs://%s: client: %w", bucket, err)
	}
	if prefix != "" {
		prefix += "/"
	}
	return &gcsStore{client: c, bucket: c.Bucket(bucket), name: bucket, prefix: prefix}, nil
}

func (s *gcsStore) String() string { return "gs://" + s.name + "/" + s.prefix }

func (s *gcsStore) PutIfAbsent(ctx context.Context, name string, data []byte, contentType string) (bool, error) {
	w := s.bucket.Object(s.prefix + name).If(storage.Conditions{DoesNotExist: true}).NewWriter(ctx)
	// One request, no resumable session: the object exists entirely or
	// not at all.
	w.ChunkSize = 0
	w.ContentType = contentType
	if _, err := w.Write(data); err != nil {
		w.Close()
		return false, gcsError(err)
	}
	if err := w.Close(); err != nil {
		var gerr *googleapi.Error
		if errors.As(err, &gerr) && gerr.Code == http.StatusPreconditionFailed {
			return false, nil
		}
		return false, gcsError(err)
	}
	return true, nil
}

func (s *gcsStore) List(ctx context.Context, prefix string) ([]string, error) {
	q := &storage.Query{Prefix: s.prefix + prefix}
	if err := q.SetAttrSelection([]string{"Name"}); err != nil {
		return nil, err
	}
	it := s.bucket.Objects(ctx, q)
	var names []string
	for {
		a, err := it.Next()
		if err == iterator.Done {
			return names, nil
		}
		if err != nil {
			return names, gcsError(err)
		}
		names = append(names, a.Name[len(s.prefix):])
	}
}

func (s *gcsStore) Get(ctx context.Context, name string) ([]byte, error) {
	r, err := s.bucket.Object(s.prefix + name).NewReader(ctx)
	if err != nil {
		return nil, gcsError(err)
	}
	defer r.Close()
	return io.ReadAll(r)
}

func (s *gcsStore) Close() error { return s.client.Close() }

// gcsError marks the answers no retry will change as permanent.
func gcsError(err error) error {
	var gerr *googleapi.Error
	if errors.Is(err, storage.ErrBucketNotExist) ||
		(errors.As(err, &gerr) && (gerr.Code == http.StatusBadRequest || gerr.Code == http.StatusUnauthorized ||
			gerr.Code == http.StatusForbidden || gerr.Code == http.StatusNotFound)) {
		return &permanentError{err}
	}
	return err
}
