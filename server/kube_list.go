package server

import (
	"bufio"
	"slices"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// Items of a list of the Kubernetes API. The API server writes the items
// of a built-in kind's list without kind and apiVersion, and those of a
// custom resource's list with them. The cache holds every object with
// both (cache.Shape adds them first when the API server left them out; in
// a watch event's object the API server wrote them first itself), so a
// /k8s list of a built-in kind leaves out the leading kind and apiVersion
// of each item: it writes '{' and the rest of the stored bytes, without
// copying them. kubeindex's own REST API keeps them.

// isCustomResource reports whether res is served by a CRD (or an
// aggregated API server): not in a built-in group.
func isCustomResource(res cache.Resource) bool {
	return !slices.Contains(kubeGroupOrder, res.Group)
}

// listItems is how a /k8s list writes its items: nil (as stored) for a
// custom resource, whose items keep their kind and apiVersion.
func listItems(res cache.Resource) itemEncoding {
	if isCustomResource(res) {
		return nil
	}
	return withoutTypeMeta{}
}

// withoutTypeMeta writes objects without their leading kind and
// apiVersion.
type withoutTypeMeta struct{}

// The leading members are read from the object's first piece (see
// cache.Object.Pieces), which holds them: repeated content is stored in
// pieces only inside spec. An object's pieces are written as they are,
// never joined.

func (withoutTypeMeta) size(o *cache.Object) int {
	var buf [8][]byte
	if cut := typeMetaEnd(o.Pieces(buf[:0])[0]); cut > 1 {
		return o.Len() - cut + 1
	}
	return o.Len()
}

func (withoutTypeMeta) write(bw *bufio.Writer, o *cache.Object) {
	var buf [8][]byte
	pieces := o.Pieces(buf[:0])
	if cut := typeMetaEnd(pieces[0]); cut > 1 {
		bw.WriteByte('{')
		pieces[0] = pieces[0][cut:]
	}
	for _, p := range pieces {
		bw.Write(p)
	}
}

// typeMetaEnd returns where raw continues after its leading kind and
// apiVersion members and the comma after them, so that '{' followed by
// raw[end:] is the object without them; 1 when it does not begin with
// either.
func typeMetaEnd(raw []byte) int {
	r, err := jsonscan.OpenObject(raw, 0)
	if err != nil || len(raw) == 0 || raw[0] != '{' {
		return 1
	}
	end := 1
	for range 2 {
		ok, err := r.Next()
		if err != nil || !ok || !(jsonscan.KeyIs(r.Key, "kind") || jsonscan.KeyIs(r.Key, "apiVersion")) {
			break
		}
		if end, err = r.Skip(); err != nil {
			return 1
		}
	}
	if end == 1 {
		return 1
	}
	i := jsonscan.SkipSpace(raw, end)
	if i < len(raw) && raw[i] == ',' {
		i = jsonscan.SkipSpace(raw, i+1)
	}
	return i
}
