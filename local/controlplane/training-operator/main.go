// The Kubeflow training operator v1.9.3 (PyTorchJob and the other kubeflow.org/v1 kinds) for a
// manager that runs on the host beside its API server, as the local stack runs it.
//
// It follows upstream's github.com/kubeflow/training-operator@v1.9.3/cmd/training-operator.v1/main.go
// step by step (the same scheme, flags and defaults, reconcilers and webhooks, probes), with one
// difference: upstream always starts a certificate rotator (pkg/cert/cert.go: cert-controller writing
// into a fixed /tmp/k8s-webhook-server/serving-certs a certificate for
// training-operator.<namespace>.svc, from a Secret that must exist) and binds its webhook server on
// every interface. Here the webhook server listens on --webhook-server-host (127.0.0.1) with the
// tls.crt/tls.key of --webhook-cert-dir, which the caller provides and registers by URL, as
// controller-runtime's envtest does; nothing is rotated and nothing is written outside that folder.
package main

import (
	"errors"
	"flag"
	"net/http"
	"os"
	"strings"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/client-go/util/flowcontrol"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	schedulerpluginsv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	volcanoclient "volcano.sh/apis/pkg/client/clientset/versioned"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"github.com/kubeflow/training-operator/pkg/config"
	controllerv1 "github.com/kubeflow/training-operator/pkg/controller.v1"
	"github.com/kubeflow/training-operator/pkg/controller.v1/common"
	"github.com/kubeflow/training-operator/pkg/webhooks"
)

// EnvKubeflowNamespace is upstream's: the namespace to watch when --namespace is not given.
const EnvKubeflowNamespace = "KUBEFLOW_NAMESPACE"

var (
	scheme   = runtime.NewScheme()
	setupLog = ctrl.Log.WithName("setup")
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kubeflowv1.AddToScheme(scheme))
	utilruntime.Must(v1beta1.AddToScheme(scheme))
	utilruntime.Must(schedulerpluginsv1alpha1.AddToScheme(scheme))
}

func main() {
	var metricsAddr string
	var enableLeaderElection bool
	var leaderElectionID string
	var probeAddr string
	var enabledSchemes controllerv1.EnabledSchemes
	var gangSchedulerName string
	var namespace string
	var controllerThreads int
	var webhookServerHost string
	var webhookServerPort int
	var webhookCertDir string
	var clientQps int
	var clientBurst int

	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "The address the metric endpoint binds to.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "The address the probe endpoint binds to.")
	flag.BoolVar(&enableLeaderElection, "leader-elect", false,
		"Enable leader election for controller manager. "+
			"Enabling this will ensure there is only one active controller manager.")
	flag.StringVar(&leaderElectionID, "leader-election-id", "1ca428e5.training-operator.kubeflow.org", "The ID for leader election.")
	flag.Var(&enabledSchemes, "enable-scheme", "Enable scheme(s) as --enable-scheme=tfjob --enable-scheme=pytorchjob, case insensitive."+
		" Now supporting TFJob, PyTorchJob, XGBoostJob, PaddleJob, JAXJob. By default, all supported schemes will be enabled.")
	flag.StringVar(&gangSchedulerName, "gang-scheduler-name", "", "Now Supporting volcano and scheduler-plugins."+
		" Note: If you set another scheduler name, the training-operator assumes it's the scheduler-plugins.")
	flag.StringVar(&namespace, "namespace", os.Getenv(EnvKubeflowNamespace), "The namespace to monitor kubeflow jobs. If unset, it monitors all namespaces cluster-wide."+
		"If set, it only monitors kubeflow jobs in the given namespace.")
	flag.IntVar(&controllerThreads, "controller-threads", 1, "Number of worker threads used by the controller.")
	flag.IntVar(&clientQps, "kube-api-qps", 20, "QPS indicates the maximum QPS to the master from this client.")
	flag.IntVar(&clientBurst, "kube-api-burst", 30, "Maximum burst for throttle.")
	flag.StringVar(&config.Config.PyTorchInitContainerImage, "pytorch-init-container-image",
		config.PyTorchInitContainerImageDefault, "The image for pytorch init container")
	flag.StringVar(&config.Config.PyTorchInitContainerTemplateFile, "pytorch-init-container-template-file",
		config.PyTorchInitContainerTemplateFileDefault, "The template file for pytorch init container")
	flag.IntVar(&config.Config.PyTorchInitContainerMaxTries, "pytorch-init-container-max-tries",
		config.PyTorchInitContainerMaxTriesDefault, "The number of tries for the pytorch init container")
	flag.StringVar(&config.Config.MPIKubectlDeliveryImage, "mpi-kubectl-delivery-image",
		config.MPIKubectlDeliveryImageDefault, "The image for mpi launcher init container")

	// Upstream's --webhook-server-port, and two flags in place of its certificate rotator's
	// (--webhook-service-name, --webhook-secret-name).
	flag.StringVar(&webhookServerHost, "webhook-server-host", "127.0.0.1", "Address the webhook server listens on.")
	flag.IntVar(&webhookServerPort, "webhook-server-port", 9443, "Endpoint port for the webhook server.")
	flag.StringVar(&webhookCertDir, "webhook-cert-dir", "", "Folder of the webhook server's tls.crt and tls.key (required).")

	opts := zap.Options{
		Development:     true,
		StacktraceLevel: zapcore.DPanicLevel,
	}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))

	if webhookCertDir == "" {
		setupLog.Error(errors.New("--webhook-cert-dir is required"), "no webhook certificate")
		os.Exit(1)
	}

	var cacheOpts cache.Options
	if namespace != "" {
		cacheOpts = cache.Options{
			DefaultNamespaces: map[string]cache.Config{
				namespace: {},
			},
		}
	}

	cfg := ctrl.GetConfigOrDie()
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(float32(clientQps), clientBurst)

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Metrics: metricsserver.Options{
			BindAddress: metricsAddr,
		},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    webhookServerHost,
			Port:    webhookServerPort,
			CertDir: webhookCertDir,
		}),
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         enableLeaderElection,
		LeaderElectionID:       leaderElectionID,
		Cache:                  cacheOpts,
	})
	if err != nil {
		setupLog.Error(err, "unable to start manager")
		os.Exit(1)
	}

	setupProbeEndpoints(mgr)
	// Upstream sets the controllers up in a goroutine once its rotator has written the
	// certificates; they are there from the start here.
	setupControllers(mgr, enabledSchemes, gangSchedulerName, controllerThreads)

	setupLog.Info("starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		setupLog.Error(err, "problem running manager")
		os.Exit(1)
	}
}

func setupControllers(mgr ctrl.Manager, enabledSchemes controllerv1.EnabledSchemes, gangSchedulerName string, controllerThreads int) {
	setupLog.Info("registering controllers...")
	gangSchedulingSetupFunc := common.GenNonGangSchedulerSetupFunc()
	if strings.EqualFold(gangSchedulerName, string(common.GangSchedulerVolcano)) {
		cfg := mgr.GetConfig()
		volcanoClientSet := volcanoclient.NewForConfigOrDie(cfg)
		gangSchedulingSetupFunc = common.GenVolcanoSetupFunc(volcanoClientSet)
		gvk := v1beta1.SchemeGroupVersion.WithKind("PodGroup")
		validateCRD(mgr, gvk)
	} else if gangSchedulerName != "" {
		gangSchedulingSetupFunc = common.GenSchedulerPluginsSetupFunc(mgr.GetClient(), gangSchedulerName)
		gvk := schedulerpluginsv1alpha1.SchemeGroupVersion.WithKind("PodGroup")
		validateCRD(mgr, gvk)
	}

	if enabledSchemes.Empty() {
		enabledSchemes.FillAll()
	}
	errMsg := "failed to set up controllers"
	for _, s := range enabledSchemes {
		setupReconcilerFunc, supportedReconciler := controllerv1.SupportedSchemeReconciler[s]
		if !supportedReconciler {
			setupLog.Error(errors.New(errMsg), "scheme is not supported", "scheme", s)
			os.Exit(1)
		}
		if err := setupReconcilerFunc(mgr, gangSchedulingSetupFunc, controllerThreads); err != nil {
			setupLog.Error(errors.New(errMsg), "unable to create controller", "scheme", s)
			os.Exit(1)
		}
		setupWebhookFunc, supportedWebhook := webhooks.SupportedSchemeWebhook[s]
		if !supportedWebhook {
			setupLog.Error(errors.New(errMsg), "scheme is not supported", "scheme", s)
			os.Exit(1)
		}
		if err := setupWebhookFunc(mgr); err != nil {
			setupLog.Error(errors.New(errMsg), "unable to start webhook server", "scheme", s)
			os.Exit(1)
		}
	}
}

// setupProbeEndpoints is upstream's: ready once the webhook server listens, so that the first
// requests that need the webhook are not refused while the operator starts.
func setupProbeEndpoints(mgr ctrl.Manager) {
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		setupLog.Error(err, "unable to set up health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", func(req *http.Request) error {
		return mgr.GetWebhookServer().StartedChecker()(req)
	}); err != nil {
		setupLog.Error(err, "unable to set up ready check")
		os.Exit(1)
	}
}

func validateCRD(mgr ctrl.Manager, gvk schema.GroupVersionKind) {
	_, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		if meta.IsNoMatchError(err) {
			setupLog.Error(err, "crd might be missing, please install crd", "apiVersion", gvk.GroupVersion().String(), "kind", gvk.Kind)
			os.Exit(1)
		}
		setupLog.Error(err, "unable to get crd", "apiVersion", gvk.GroupVersion().String(), "kind", gvk.Kind)
		os.Exit(1)
	}
}
