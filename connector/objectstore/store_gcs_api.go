package objectstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// gcsAPI is the part of the Cloud Storage JSON API the store speaks:
// https://cloud.google.com/storage/docs/json_api/v1/objects. It does not
// retry; the route's retry step does, and a put is safe to repeat.
type gcsAPI struct {
	client *http.Client
	root   string // scheme://host, no trailing slash
}

// gcsAPIError is an answer other than 2xx, with the message the API put
// in its error body when there is one.
type gcsAPIError struct {
	Code    int
	Message string
}

func (e *gcsAPIError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("googleapi: got HTTP response code %d", e.Code)
	}
	return fmt.Sprintf("googleapi: Error %d: %s", e.Code, e.Message)
}

// objectsURL is root/[upload/]storage/v1/b/BUCKET/o[/OBJECT] with query.
// The object name is one escaped path segment ('/' is %2F), as the API
// wants it.
func (a *gcsAPI) objectsURL(upload bool, bucket, object string, query url.Values) string {
	var b strings.Builder
	b.WriteString(a.root)
	if upload {
		b.WriteString("/upload")
	}
	b.WriteString("/storage/v1/b/")
	b.WriteString(url.PathEscape(bucket))
	b.WriteString("/o")
	if object != "" {
		b.WriteString("/")
		b.WriteString(url.PathEscape(object))
	}
	if len(query) > 0 {
		b.WriteString("?")
		b.WriteString(query.Encode())
	}
	return b.String()
}

// do sends req and returns the response when it is 2xx; otherwise it
// reads the error body and closes it.
func (a *gcsAPI) do(req *http.Request) (*http.Response, error) {
	req.Header.Set("User-Agent", "mqb")
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	aerr := &gcsAPIError{Code: resp.StatusCode}
	var reply struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &reply) == nil && reply.Error.Message != "" {
		aerr.Message = reply.Error.Message
	} else {
		aerr.Message = strings.TrimSpace(string(body))
	}
	return nil, aerr
}

// insertIfAbsent writes data as object in one media upload with
// ifGenerationMatch=0: no resumable session, so the object exists entirely
// or not at all, and a 412 says it already did.
func (a *gcsAPI) insertIfAbsent(ctx context.Context, bucket, object, contentType string, data []byte) error {
	q := url.Values{"uploadType": {"media"}, "name": {object}, "ifGenerationMatch": {"0"}, "fields": {"name"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.objectsURL(true, bucket, "", q), bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := a.do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// list calls each with the name and generation of every object that
// starts with prefix, page after page.
func (a *gcsAPI) list(ctx context.Context, bucket, prefix string, each func(name string, generation int64)) error {
	q := url.Values{"prefix": {prefix}, "fields": {"items(name,generation),nextPageToken"}}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.objectsURL(false, bucket, "", q), nil)
		if err != nil {
			return err
		}
		resp, err := a.do(req)
		if err != nil {
			return err
		}
		var page struct {
			Items []struct {
				Name       string `json:"name"`
				Generation int64  `json:"generation,string"`
			} `json:"items"`
			NextPageToken string `json:"nextPageToken"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		io.Copy(io.Discard, resp.Body) // to the end, so the connection is reused
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("list gs://%s/%s: %w", bucket, prefix, err)
		}
		for _, o := range page.Items {
			each(o.Name, o.Generation)
		}
		if page.NextPageToken == "" {
			return nil
		}
		q.Set("pageToken", page.NextPageToken)
	}
}

// download streams object's content.
func (a *gcsAPI) download(ctx context.Context, bucket, object string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.objectsURL(false, bucket, object, url.Values{"alt": {"media"}}), nil)
	if err != nil {
		return nil, err
	}
	resp, err := a.do(req)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}
