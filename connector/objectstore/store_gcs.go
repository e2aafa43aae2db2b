package objectstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"

	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	gcs "google.golang.org/api/storage/v1"
)

// gcsStore is an object store over a Google Cloud Storage bucket and
// prefix (gs://bucket/prefix), spoken to through the JSON API client
// (google.golang.org/api/storage/v1: net/http, no gRPC). The client takes
// Application Default Credentials, or talks to an emulator without
// credentials when STORAGE_EMULATOR_HOST is set. A put is one multipart
// request under the final name with ifGenerationMatch=0, the
// does-not-exist precondition: the request is the commit, and a 412 means
// an earlier write of the same name already committed.
type gcsStore struct {
	svc    *gcs.Service
	name   string // bucket
	prefix string // "" or "dir/" under which names live
}

// gcsScopes are the scopes the store asks Application Default Credentials
// for, as the Cloud Storage client library asks.
var gcsScopes = []string{gcs.DevstorageFullControlScope, gcs.CloudPlatformScope}

// gcsEmulatorOptions are the options that point the client at
// STORAGE_EMULATOR_HOST (host:port or a URL), as the Cloud Storage client
// library honours it; nil when it is unset.
func gcsEmulatorOptions() []option.ClientOption {
	host := os.Getenv("STORAGE_EMULATOR_HOST")
	if host == "" {
		return nil
	}
	if !strings.Contains(host, "://") {
		host = "http://" + host
	}
	return []option.ClientOption{
		option.WithEndpoint(strings.TrimRight(host, "/") + "/storage/v1/"),
		option.WithoutAuthentication(),
	}
}

func openGCSStore(ctx context.Context, bucket, prefix string) (*gcsStore, error) {
	opts := gcsEmulatorOptions()
	if opts == nil {
		opts = []option.ClientOption{option.WithScopes(gcsScopes...)}
	}
	svc, err := gcs.NewService(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("gs://%s: client: %w", bucket, err)
	}
	if prefix != "" {
		prefix += "/"
	}
	return &gcsStore{svc: svc, name: bucket, prefix: prefix}, nil
}

func (s *gcsStore) String() string { return "gs://" + s.name + "/" + s.prefix }

func (s *gcsStore) PutIfAbsent(ctx context.Context, name string, data []byte, contentType string) (bool, error) {
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	// ChunkSize 0: one request, no resumable session, so the object
	// exists entirely or not at all.
	_, err := s.svc.Objects.Insert(s.name, &gcs.Object{Name: s.prefix + name, ContentType: contentType}).
		IfGenerationMatch(0).
		Media(bytes.NewReader(data), googleapi.ChunkSize(0), googleapi.ContentType(contentType)).
		Fields("name").
		Context(ctx).Do()
	if err != nil {
		if gcsCode(err) == http.StatusPreconditionFailed {
			return false, nil
		}
		return false, gcsError(err)
	}
	return true, nil
}

func (s *gcsStore) List(ctx context.Context, prefix string) ([]string, error) {
	var names []string
	// The JSON API lists in lexicographic order of the names.
	err := s.svc.Objects.List(s.name).Prefix(s.prefix+prefix).Fields("items(name)", "nextPageToken").
		Pages(ctx, func(page *gcs.Objects) error {
			for _, o := range page.Items {
				names = append(names, o.Name[len(s.prefix):])
			}
			return nil
		})
	if err != nil {
		return names, gcsError(err)
	}
	return names, nil
}

func (s *gcsStore) Get(ctx context.Context, name string) ([]byte, error) {
	return readObject(ctx, s, name)
}

// open streams an object's body (objectReader). A missing object is an
// error that is fs.ErrNotExist.
func (s *gcsStore) open(ctx context.Context, name string) (io.ReadCloser, error) {
	resp, err := s.svc.Objects.Get(s.name, s.prefix+name).Context(ctx).Download()
	if err != nil {
		if gcsCode(err) == http.StatusNotFound {
			// Gone since it was listed (the source skips it), or never there.
			return nil, fmt.Errorf("%s%s: %w (%v)", s.String(), name, fs.ErrNotExist, err)
		}
		return nil, gcsError(err)
	}
	return resp.Body, nil
}

// The client holds no connection of its own: it uses the shared
// transport's pool.
func (s *gcsStore) Close() error { return nil }

// gcsCode is the HTTP status of a JSON API error, 0 for another error.
func gcsCode(err error) int {
	var gerr *googleapi.Error
	if errors.As(err, &gerr) {
		return gerr.Code
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
