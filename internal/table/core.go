package table

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func servicePrinter() Convertor {
	return printer[corev1.Service]{columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Type", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["type"]},
		{Name: "Cluster-IP", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["clusterIP"]},
		{Name: "External-IP", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["externalIPs"]},
		{Name: "Port(s)", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["ports"]},
		ageColumn,
		{Name: "Selector", Type: "string", Priority: 1, Description: corev1.ServiceSpec{}.SwaggerDoc()["selector"]},
	}, cells: func(s *corev1.Service, now time.Time) ([]any, []metav1.TableRowCondition) {
		clusterIP := "<none>"
		if len(s.Spec.ClusterIPs) > 0 {
			clusterIP = s.Spec.ClusterIPs[0]
		}
		ports := servicePorts(s.Spec.Ports)
		if ports == "" {
			ports = "<none>"
		}
		return []any{s.Name, string(s.Spec.Type), clusterIP, serviceExternalIP(s), ports,
			since(s.CreationTimestamp, now), labels.FormatLabels(s.Spec.Selector)}, nil
	}}
}

// lbAddresses is the printers' (ingress)loadBalancerStatusStringer as the
// API server calls it (wide, so never clipped): each ingress point's IP or
// else hostname, distinct and sorted.
func lbAddresses(ips, hostnames []string) string {
	seen := make([]string, 0, len(ips))
	for i := range ips {
		switch {
		case ips[i] != "":
			seen = append(seen, ips[i])
		case hostnames[i] != "":
			seen = append(seen, hostnames[i])
		}
	}
	slices.Sort(seen)
	return strings.Join(slices.Compact(seen), ",")
}

func serviceExternalIP(s *corev1.Service) string {
	switch s.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		if len(s.Spec.ExternalIPs) > 0 {
			return strings.Join(s.Spec.ExternalIPs, ",")
		}
		return "<none>"
	case corev1.ServiceTypeLoadBalancer:
		in := s.Status.LoadBalancer.Ingress
		ips, hosts := make([]string, len(in)), make([]string, len(in))
		for i := range in {
			ips[i], hosts[i] = in[i].IP, in[i].Hostname
		}
		lb := lbAddresses(ips, hosts)
		if len(s.Spec.ExternalIPs) > 0 {
			var all []string
			if lb != "" {
				all = append(all, strings.Split(lb, ",")...)
			}
			return strings.Join(append(all, s.Spec.ExternalIPs...), ",")
		}
		if lb != "" {
			return lb
		}
		return "<pending>"
	case corev1.ServiceTypeExternalName:
		return s.Spec.ExternalName
	}
	return "<unknown>"
}

func servicePorts(ports []corev1.ServicePort) string {
	pieces := make([]string, len(ports))
	for i := range ports {
		p := &ports[i]
		if p.NodePort > 0 {
			pieces[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
		} else {
			pieces[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		}
	}
	return strings.Join(pieces, ",")
}

const (
	labelNodeRolePrefix = "node-role.kubernetes.io/"
	nodeLabelRole       = "kubernetes.io/role"
)

func nodePrinter() Convertor {
	return printer[corev1.Node]{columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Status", Type: "string", Description: "The status of the node"},
		{Name: "Roles", Type: "string", Description: "The roles of the node"},
		ageColumn,
		{Name: "Version", Type: "string", Description: corev1.NodeSystemInfo{}.SwaggerDoc()["kubeletVersion"]},
		{Name: "Internal-IP", Type: "string", Priority: 1, Description: corev1.NodeStatus{}.SwaggerDoc()["addresses"]},
		{Name: "External-IP", Type: "string", Priority: 1, Description: corev1.NodeStatus{}.SwaggerDoc()["addresses"]},
		{Name: "OS-Image", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["osImage"]},
		{Name: "Kernel-Version", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["kernelVersion"]},
		{Name: "Container-Runtime", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["containerRuntimeVersion"]},
	}, cells: nodeCells}
}

func nodeCells(n *corev1.Node, now time.Time) ([]any, []metav1.TableRowCondition) {
	// The printer keeps the last condition of each type.
	var status []string
	var ready *corev1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			ready = &n.Status.Conditions[i]
		}
	}
	switch {
	case ready == nil:
		status = append(status, "Unknown")
	case ready.Status == corev1.ConditionTrue:
		status = append(status, string(corev1.NodeReady))
	default:
		status = append(status, "Not"+string(corev1.NodeReady))
	}
	if n.Spec.Unschedulable {
		status = append(status, "SchedulingDisabled")
	}

	var roles []string
	for k, v := range n.Labels {
		switch {
		case strings.HasPrefix(k, labelNodeRolePrefix):
			if r := strings.TrimPrefix(k, labelNodeRolePrefix); r != "" {
				roles = append(roles, r)
			}
		case k == nodeLabelRole && v != "":
			roles = append(roles, v)
		}
	}
	slices.Sort(roles)
	rolesCell := strings.Join(slices.Compact(roles), ",")
	if rolesCell == "" {
		rolesCell = "<none>"
	}

	info := &n.Status.NodeInfo
	osImage, kernel, runtime := info.OSImage, info.KernelVersion, info.ContainerRuntimeVersion
	if osImage == "" {
		osImage = "<unknown>"
	}
	if kernel == "" {
		kernel = "<unknown>"
	}
	if runtime == "" {
		runtime = "<unknown>"
	}
	if info.Architecture != "" {
		kernel += " (" + info.Architecture + ")"
	}
	return []any{n.Name, strings.Join(status, ","), rolesCell, since(n.CreationTimestamp, now), info.KubeletVersion,
		nodeAddress(n, corev1.NodeInternalIP), nodeAddress(n, corev1.NodeExternalIP), osImage, kernel, runtime}, nil
}

func nodeAddress(n *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range n.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

func namespacePrinter() Convertor {
	return printer[corev1.Namespace]{columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Status", Type: "string", Description: "The status of the namespace"},
		ageColumn,
	}, cells: func(n *corev1.Namespace, now time.Time) ([]any, []metav1.TableRowCondition) {
		return []any{n.Name, string(n.Status.Phase), since(n.CreationTimestamp, now)}, nil
	}}
}

func configMapPrinter() Convertor {
	return printer[corev1.ConfigMap]{columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Data", Type: "string", Description: corev1.ConfigMap{}.SwaggerDoc()["data"]},
		ageColumn,
	}, cells: func(c *corev1.ConfigMap, now time.Time) ([]any, []metav1.TableRowCondition) {
		return []any{c.Name, int64(len(c.Data) + len(c.BinaryData)), since(c.CreationTimestamp, now)}, nil
	}}
}

func secretPrinter() Convertor {
	return printer[corev1.Secret]{columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Type", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["type"]},
		{Name: "Data", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["data"]},
		ageColumn,
	}, cells: func(s *corev1.Secret, now time.Time) ([]any, []metav1.TableRowCondition) {
		// v1's stringData is write-only: the API server folds it into data
		// before storing, so what it serves never has it.
		return []any{s.Name, string(s.Type), int64(len(s.Data)), since(s.CreationTimestamp, now)}, nil
	}}
}

func serviceAccountPrinter() Convertor {
	return printer[corev1.ServiceAccount]{columns: []metav1.TableColumnDefinition{nameColumn, ageColumn},
		cells: func(s *corev1.ServiceAccount, now time.Time) ([]any, []metav1.TableRowCondition) {
			return []any{s.Name, since(s.CreationTimestamp, now)}, nil
		}}
}

// betaStorageClassAnnotation still names a claim's class before
// spec.storageClassName (helper.GetPersistentVolumeClaimClass).
const betaStorageClassAnnotation = "volume.beta.kubernetes.io/storage-class"

func pvcPrinter() Convertor {
	return printer[corev1.PersistentVolumeClaim]{columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Status", Type: "string", Description: corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["phase"]},
		{Name: "Volume", Type: "string", Description: corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()["volumeName"]},
		{Name: "Capacity", Type: "string", Description: corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["capacity"]},
		{Name: "Access Modes", Type: "string", Description: corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["accessModes"]},
		{Name: "StorageClass", Type: "string", Description: "StorageClass of the pvc"},
		{Name: "VolumeAttributesClass", Type: "string", Description: "VolumeAttributesClass of the pvc"},
		ageColumn,
		{Name: "VolumeMode", Type: "string", Priority: 1, Description: corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()["volumeMode"]},
	}, cells: func(c *corev1.PersistentVolumeClaim, now time.Time) ([]any, []metav1.TableRowCondition) {
		phase := string(c.Status.Phase)
		if c.DeletionTimestamp != nil {
			phase = "Terminating"
		}
		vac := "<unset>"
		if c.Spec.VolumeAttributesClassName != nil {
			vac = *c.Spec.VolumeAttributesClassName
		}
		capacity, modes := "", ""
		if c.Spec.VolumeName != "" {
			modes = accessModes(c.Status.AccessModes)
			q := c.Status.Capacity[corev1.ResourceStorage]
			capacity = q.String()
		}
		mode := "<unset>"
		if c.Spec.VolumeMode != nil {
			mode = string(*c.Spec.VolumeMode)
		}
		class, ok := c.Annotations[betaStorageClassAnnotation]
		if !ok && c.Spec.StorageClassName != nil {
			class = *c.Spec.StorageClassName
		}
		return []any{c.Name, phase, c.Spec.VolumeName, capacity, modes, class, vac, since(c.CreationTimestamp, now), mode}, nil
	}}
}

// accessModes is helper.GetAccessModesAsString.
func accessModes(modes []corev1.PersistentVolumeAccessMode) string {
	var out []string
	for _, m := range []struct {
		mode  corev1.PersistentVolumeAccessMode
		short string
	}{{corev1.ReadWriteOnce, "RWO"}, {corev1.ReadOnlyMany, "ROX"}, {corev1.ReadWriteMany, "RWX"}, {corev1.ReadWriteOncePod, "RWOP"}} {
		if slices.Contains(modes, m.mode) {
			out = append(out, m.short)
		}
	}
	return strings.Join(out, ",")
}

func eventPrinter() Convertor {
	doc := corev1.Event{}.SwaggerDoc()
	return printer[corev1.Event]{columns: []metav1.TableColumnDefinition{
		{Name: "Last Seen", Type: "string", Description: doc["lastTimestamp"]},
		{Name: "Type", Type: "string", Description: doc["type"]},
		{Name: "Reason", Type: "string", Description: doc["reason"]},
		{Name: "Object", Type: "string", Description: doc["involvedObject"]},
		{Name: "Subobject", Type: "string", Priority: 1, Description: corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]},
		{Name: "Source", Type: "string", Priority: 1, Description: doc["source"]},
		{Name: "Message", Type: "string", Description: doc["message"]},
		{Name: "First Seen", Type: "string", Priority: 1, Description: doc["firstTimestamp"]},
		{Name: "Count", Type: "string", Priority: 1, Description: doc["count"]},
		{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: metaDoc["name"]},
	}, cells: eventCells}
}

// eventsV1Printer is the events.k8s.io/v1 view of the same events: the
// API server converts them to the core kind (Convert_v1_Event_To_core_Event)
// and prints them with the same printer.
func eventsV1Printer() Convertor {
	return printer[eventsv1.Event]{columns: eventPrinter().ColumnDefinitions(),
		cells: func(e *eventsv1.Event, now time.Time) ([]any, []metav1.TableRowCondition) {
			core := corev1.Event{
				ObjectMeta:          e.ObjectMeta,
				InvolvedObject:      e.Regarding,
				Reason:              e.Reason,
				Message:             e.Note,
				Source:              e.DeprecatedSource,
				FirstTimestamp:      e.DeprecatedFirstTimestamp,
				LastTimestamp:       e.DeprecatedLastTimestamp,
				Count:               e.DeprecatedCount,
				Type:                e.Type,
				EventTime:           e.EventTime,
				ReportingController: e.ReportingController,
				ReportingInstance:   e.ReportingInstance,
			}
			if e.Series != nil {
				core.Series = &corev1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
			}
			return eventCells(&core, now)
		}}
}

func eventCells(e *corev1.Event, now time.Time) ([]any, []metav1.TableRowCondition) {
	first := since(e.FirstTimestamp, now)
	if e.FirstTimestamp.IsZero() {
		first = sinceMicro(e.EventTime, now)
	}
	last := since(e.LastTimestamp, now)
	if e.LastTimestamp.IsZero() {
		last = first
	}
	count := e.Count
	if e.Series != nil {
		last = sinceMicro(e.Series.LastObservedTime, now)
		count = e.Series.Count
	} else if count == 0 {
		count = 1
	}
	target := strings.ToLower(e.InvolvedObject.Kind)
	if e.InvolvedObject.Name != "" {
		target += "/" + e.InvolvedObject.Name
	}
	component, instance := e.Source.Component, e.Source.Host
	if component == "" {
		component = e.ReportingController
	}
	if instance == "" {
		instance = e.ReportingInstance
	}
	source := component
	if instance != "" {
		source += ", " + instance
	}
	return []any{last, e.Type, e.Reason, target, e.InvolvedObject.FieldPath, source,
		strings.TrimSpace(e.Message), first, int64(count), e.Name}, nil
}
