package objectstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// s3Options are the attributes that reach an S3-compatible server other
// than AWS's: its endpoint, its region, and path-style addressing
// (http://host/bucket/key rather than http://bucket.host/key).
type s3Options struct {
	Endpoint  string
	Region    string
	PathStyle bool
}

// s3Store is an object store over an S3 bucket and prefix
// (s3://bucket/prefix), through the AWS SDK's S3 client. Credentials,
// region and endpoint come from the environment as the SDK reads it
// (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN,
// AWS_PROFILE and the shared files, AWS_REGION, AWS_ENDPOINT_URL_S3, web
// identity, the instance role), the object_store attributes overriding
// region and endpoint. A put is one PutObject under the final name with
// If-None-Match: *: the request is the commit, and a 412 means an earlier
// write of the same name already committed. Whether the server honours
// the header is a premise checked at start-up (premise.go).
type s3Store struct {
	client *s3.Client
	bucket string
	prefix string // "" or "dir/" under which names live
}

func openS3Store(ctx context.Context, bucket, prefix string, o s3Options) (*s3Store, error) {
	var load []func(*config.LoadOptions) error
	if o.Region != "" {
		load = append(load, config.WithRegion(o.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("s3://%s: configuration: %w", bucket, err)
	}
	if cfg.Region == "" {
		// A custom endpoint often has no region of its own; the
		// signature still needs one.
		cfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		so.UsePathStyle = o.PathStyle
		if so.BaseEndpoint != nil {
			// Servers other than AWS's may not take the checksums the
			// SDK adds to every upload by default.
			so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
	})
	if prefix != "" {
		prefix += "/"
	}
	return &s3Store{client: client, bucket: bucket, prefix: prefix}, nil
}

func (s *s3Store) String() string { return "s3://" + s.bucket + "/" + s.prefix }

func (s *s3Store) PutIfAbsent(ctx context.Context, name string, data []byte, contentType string) (bool, error) {
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.prefix + name),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		ContentType:   aws.String(contentType),
		IfNoneMatch:   aws.String("*"),
	})
	if err != nil {
		if s3Status(err) == http.StatusPreconditionFailed {
			return false, nil
		}
		return false, s3Error(err)
	}
	return true, nil
}

func (s *s3Store) List(ctx context.Context, prefix string) ([]string, error) {
	names, _, err := s.ListStamped(ctx, prefix)
	return names, err
}

// ListStamped is List with each object's LastModified, in nanoseconds
// (stampLister).
func (s *s3Store) ListStamped(ctx context.Context, prefix string) ([]string, []int64, error) {
	var names []string
	var stamps []int64
	// ListObjectsV2 returns keys in UTF-8 binary order: lexicographic.
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket),
		Prefix: aws.String(s.prefix + prefix),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return names, stamps, s3Error(err)
		}
		for _, o := range page.Contents {
			names = append(names, aws.ToString(o.Key)[len(s.prefix):])
			stamps = append(stamps, aws.ToTime(o.LastModified).UnixNano())
		}
	}
	return names, stamps, nil
}

func (s *s3Store) Get(ctx context.Context, name string) ([]byte, error) {
	return readObject(ctx, s, name)
}

// open streams an object's body (objectReader). A missing object is an
// error that is fs.ErrNotExist.
func (s *s3Store) open(ctx context.Context, name string) (io.ReadCloser, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + name)})
	if err != nil {
		var nsk *types.NoSuchKey
		if errors.As(err, &nsk) {
			return nil, fmt.Errorf("%s%s: %w (%v)", s.String(), name, fs.ErrNotExist, err)
		}
		return nil, s3Error(err)
	}
	return out.Body, nil
}

// delete removes an object (the start-up probe's).
func (s *s3Store) delete(ctx context.Context, name string) error {
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + name)})
	return err
}

// The client holds no connection of its own beyond its transport's pool.
func (s *s3Store) Close() error { return nil }

// s3Status is the HTTP status of a failed S3 call, 0 when none came back.
func s3Status(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// s3Error marks the answers no retry will change (a bad request, denied
// credentials, a missing bucket, an unsupported header) as permanent. A
// 409 (a conditional write racing another on the same name) and any 5xx
// are worth another attempt.
func s3Error(err error) error {
	switch s3Status(err) {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusNotImplemented:
		return &permanentError{err}
	}
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchBucket" {
		return &permanentError{err}
	}
	return err
}
