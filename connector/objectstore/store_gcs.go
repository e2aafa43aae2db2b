package objectstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"

	"golang.org/x/oauth2/google"
)

// gcsStore is an object store over a Google Cloud Storage bucket and
// prefix (gs://bucket/prefix), spoken to through the few calls of the
// JSON API it needs, over net/http: a media upload, a paged listing and a
// media download (store_gcs_api.go). It takes Application Default Credentials,
// or talks to an emulator without credentials when STORAGE_EMULATOR_HOST
// is set. A put is one media upload under the final name with
// ifGenerationMatch=0, the does-not-exist precondition: the request is
// the commit, and a 412 means an earlier write of the same name already
// committed.
type gcsStore struct {
	api    gcsAPI
	name   string // bucket
	prefix string // "" or "dir/" under which names live
}

// gcsScopes are the scopes the store asks Application Default Credentials
// for, as the Cloud Storage client library asks.
var gcsScopes = []string{
	"https://www.googleapis.com/auth/devstorage.full_control",
	"https://www.googleapis.com/auth/cloud-platform",
}

// gcsEndpoint is where the JSON API lives: the emulator STORAGE_EMULATOR_HOST
// names (host:port or a URL), as the Cloud Storage client library honours
// it, or Google's. emulator says which.
func gcsEndpoint() (root string, emulator bool) {
	host := os.Getenv("STORAGE_EMULATOR_HOST")
	if host == "" {
		return "https://storage.googleapis.com", false
	}
	if !strings.Contains(host, "://") {
		host = "http://" + host
	}
	return strings.TrimRight(host, "/"), true
}

func openGCSStore(ctx context.Context, bucket, prefix string) (*gcsStore, error) {
	root, emulator := gcsEndpoint()
	client := &http.Client{Transport: http.DefaultTransport}
	if !emulator {
		// Requests carry a token from the credentials found now; the
		// token source refreshes it as it expires.
		c, err := google.DefaultClient(context.WithoutCancel(ctx), gcsScopes...)
		if err != nil {
			return nil, fmt.Errorf("gs://%s: credentials: %w", bucket, err)
		}
		client = c
	}
	if prefix != "" {
		prefix += "/"
	}
	return &gcsStore{api: gcsAPI{client: client, root: root}, name: bucket, prefix: prefix}, nil
}

func (s *gcsStore) String() string { return "gs://" + s.name + "/" + s.prefix }

func (s *gcsStore) PutIfAbsent(ctx context.Context, name string, data []byte, contentType string) (bool, error) {
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	err := s.api.insertIfAbsent(ctx, s.name, s.prefix+name, contentType, data)
	if err != nil {
		if gcsCode(err) == http.StatusPreconditionFailed {
			return false, nil
		}
		return false, gcsError(err)
	}
	return true, nil
}

func (s *gcsStore) List(ctx context.Context, prefix string) ([]string, error) {
	names, _, err := s.ListStamped(ctx, prefix)
	return names, err
}

// ListStamped is List with each object's generation, which grows with
// every write of it (stampLister).
func (s *gcsStore) ListStamped(ctx context.Context, prefix string) ([]string, []int64, error) {
	var names []string
	var gens []int64
	// The JSON API lists in lexicographic order of the names.
	err := s.api.list(ctx, s.name, s.prefix+prefix, func(name string, generation int64) {
		names = append(names, name[len(s.prefix):])
		gens = append(gens, generation)
	})
	if err != nil {
		return names, gens, gcsError(err)
	}
	return names, gens, nil
}

func (s *gcsStore) Get(ctx context.Context, name string) ([]byte, error) {
	return readObject(ctx, s, name)
}

// open streams an object's body (objectReader). A missing object is an
// error that is fs.ErrNotExist.
func (s *gcsStore) open(ctx context.Context, name string) (io.ReadCloser, error) {
	body, err := s.api.download(ctx, s.name, s.prefix+name)
	if err != nil {
		if gcsCode(err) == http.StatusNotFound {
			// Gone since it was listed (the source skips it), or never there.
			return nil, fmt.Errorf("%s%s: %w (%v)", s.String(), name, fs.ErrNotExist, err)
		}
		return nil, gcsError(err)
	}
	return body, nil
}

// The client holds no connection of its own: it uses the shared
// transport's pool.
func (s *gcsStore) Close() error { return nil }

// gcsCode is the HTTP status of a JSON API error, 0 for another error.
func gcsCode(err error) int {
	var aerr *gcsAPIError
	if errors.As(err, &aerr) {
		return aerr.Code
	}
	return 0
}

// gcsError marks the answers no retry will change (a bad request, denied
// credentials, a missing bucket) as permanent.
func gcsError(err error) error {
	switch gcsCode(err) {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		return &permanentError{err}
	}
	return err
}
