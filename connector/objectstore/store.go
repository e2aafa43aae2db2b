package objectstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// objectStore is the little an object_store sink needs from a bucket or a
// directory: write an object once, list names, read one back. Names are
// relative to the store's root (the url's prefix) and use '/' as separator.
type objectStore interface {
	// PutIfAbsent writes data under name unless an object of that name
	// already exists. created is false when one did: the write is then a
	// repeat, and callers treat it as success.
	PutIfAbsent(ctx context.Context, name string, data []byte, contentType string) (created bool, err error)
	// List returns the names under the root that start with prefix, in
	// lexicographic order.
	List(ctx context.Context, prefix string) ([]string, error)
	// Get reads an object.
	Get(ctx context.Context, name string) ([]byte, error)
	Close() error
	// String is the store's location with any secret removed.
	String() string
}

// readObject reads a whole object from a store that streams it.
func readObject(ctx context.Context, s objectReader, name string) ([]byte, error) {
	r, err := s.open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// errPermanent marks a store error that retrying will not cure (a denied
// listing, a missing bucket).
var errPermanent = errors.New("permanent")

type permanentError struct{ err error }

func (e *permanentError) Error() string        { return e.err.Error() }
func (e *permanentError) Unwrap() error        { return e.err }
func (e *permanentError) Is(target error) bool { return target == errPermanent }

// openObjectStore opens the store a gs://, s3:// or file:// url names;
// s3o applies to s3:// only.
func openObjectStore(ctx context.Context, rawURL, baseDir string, s3o s3Options) (objectStore, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %v", plan.RedactURLs(rawURL), strings.ReplaceAll(err.Error(), rawURL, plan.RedactURLs(rawURL)))
	}
	switch u.Scheme {
	case "gs":
		if u.Host == "" {
			return nil, fmt.Errorf("%s: no bucket (want gs://bucket/prefix)", plan.RedactURLs(rawURL))
		}
		return openGCSStore(ctx, u.Host, strings.Trim(u.Path, "/"))
	case "s3":
		if u.Host == "" {
			return nil, fmt.Errorf("%s: no bucket (want s3://bucket/prefix)", plan.RedactURLs(rawURL))
		}
		return openS3Store(ctx, u.Host, strings.Trim(u.Path, "/"), s3o)
	case "file":
		dir := u.Path
		if u.Host != "" && u.Host != "localhost" {
			// file://relative/dir: the host is the first path element.
			dir = u.Host + u.Path
		}
		if dir == "" {
			return nil, fmt.Errorf("%s: no directory (want file:///dir)", rawURL)
		}
		return openDirStore(dir, baseDir)
	default:
		return nil, fmt.Errorf("scheme %q is not supported (want gs://, s3:// or file://)", u.Scheme)
	}
}

// s3OptionsFor checks that the s3-only attributes (endpoint, region,
// path_style) are given only with an s3:// url and returns them.
func s3OptionsFor(b *runtime.BuildEnv, rawURL string, o s3Options) (s3Options, error) {
	if strings.HasPrefix(rawURL, "s3://") {
		return o, nil
	}
	for attr, set := range map[string]bool{"endpoint": o.Endpoint != "", "region": o.Region != "", "path_style": o.PathStyle} {
		if set {
			return s3Options{}, b.Errorf(attr, "%s applies to s3:// urls only", attr)
		}
	}
	return o, nil
}
