package cache

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// apiClient speaks to the API server over plain HTTP with client-go's
// transport (TLS, bearer tokens, exec plugins, impersonation all apply) but
// without client-go's decoding: responses are read as bytes.
type apiClient struct {
	http      *http.Client
	base      *url.URL
	userAgent string
	// compress leaves Accept-Encoding to the transport (gzip); otherwise
	// requests ask for identity. The header is set per request because
	// client-go hands plain-HTTP configs Go's default transport, which
	// ignores rest.Config.DisableCompression.
	compress bool
}

// newAPIClient reads the API server at cfg with hc, or, when hc is nil,
// with apiHTTPClient's for cfg.
func newAPIClient(cfg *rest.Config, hc *http.Client) (*apiClient, error) {
	if hc == nil {
		var err error
		if hc, err = apiHTTPClient(cfg); err != nil {
			return nil, err
		}
	}
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("API server address %q: %w", cfg.Host, err)
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = "kubeindex"
	}
	return &apiClient{http: hc, base: base, userAgent: ua, compress: !cfg.DisableCompression}, nil
}

// apiHTTPClient is client-go's HTTP client for cfg with each connection
// read through a buffer (bufferedDial).
func apiHTTPClient(cfg *rest.Config) (*http.Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Dial = bufferedDial(cfg.Dial)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("building HTTP client: %w", err)
	}
	return hc, nil
}

// collectionURL returns the URL of a resource collection, optionally within
// one namespace.
func (c *apiClient) collectionURL(r *Resource, namespace string, q url.Values) string {
	u := *c.base
	parts := []string{u.Path}
	if r.Group == "" {
		parts = append(parts, "api", r.Version)
	} else {
		parts = append(parts, "apis", r.Group, r.Version)
	}
	if namespace != "" {
		parts = append(parts, "namespaces", namespace)
	}
	parts = append(parts, r.Plural)
	u.Path = path.Join(parts...)
	if !strings.HasPrefix(u.Path, "/") {
		u.Path = "/" + u.Path
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// get issues a GET and returns the response for a 200. Any other status is
// turned into the apimachinery error the API server's Status describes, so
// client-go's reflector sees 410 Gone, 403 and friends for what they are.
func (c *apiClient) get(ctx context.Context, rawURL string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if !c.compress {
		req.Header.Set("Accept-Encoding", "identity")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return nil, statusError(resp.StatusCode, body)
}

func statusError(code int, body []byte) error {
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" {
		if st.Code == 0 {
			st.Code = int32(code)
		}
		return &apierrors.StatusError{ErrStatus: st}
	}
	return apierrors.NewGenericServerResponse(code, http.MethodGet, schema.GroupResource{}, "", strings.TrimSpace(string(body)), 0, false)
}

// listQuery turns the reflector's options plus the resource's own
// server-side selectors into query parameters.
func listQuery(opts metav1.ListOptions, labelSelector, fieldSelector string) url.Values {
	q := url.Values{}
	if labelSelector != "" {
		q.Set("labelSelector", labelSelector)
	}
	if fieldSelector != "" {
		q.Set("fieldSelector", fieldSelector)
	}
	if opts.ResourceVersion != "" {
		q.Set("resourceVersion", opts.ResourceVersion)
	}
	if opts.ResourceVersionMatch != "" {
		q.Set("resourceVersionMatch", string(opts.ResourceVersionMatch))
	}
	if opts.Limit > 0 {
		q.Set("limit", fmt.Sprint(opts.Limit))
	}
	if opts.Continue != "" {
		q.Set("continue", opts.Continue)
	}
	if opts.TimeoutSeconds != nil {
		q.Set("timeoutSeconds", fmt.Sprint(*opts.TimeoutSeconds))
	}
	if opts.AllowWatchBookmarks {
		q.Set("allowWatchBookmarks", "true")
	}
	return q
}
