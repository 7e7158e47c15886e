import { type ComponentType, render } from 'preact';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { api, errorText, session, type User } from './lib/api.js';
import { Ctx, isTenantAdmin } from './lib/app-context.js';
import { LiveClient, type LiveState } from './lib/live.js';
import { Link, match, navigate, useLocation } from './lib/router.js';

/**
 * The shell: sign-in, navigation, and the routes. Every page beyond sign-in is its own chunk,
 * loaded when first opened (the initial load stays small: build-ui.mjs checks the budget).
 */

type PageProps = { params: Record<string, string> };
type Loader = () => Promise<ComponentType<PageProps>>;

const ROUTES: Array<{ path: string; load: Loader }> = [
  { path: '/devices', load: () => import('./pages/devices.js').then((m) => m.DevicesPage) },
  { path: '/devices/:id', load: () => import('./pages/device.js').then((m) => m.DevicePage) },
  { path: '/alarms', load: () => import('./pages/alarms.js').then((m) => m.AlarmsPage) },
  { path: '/profiles', load: () => import('./pages/profiles.js').then((m) => m.ProfilesPage) },
  { path: '/profiles/:id', load: () => import('./pages/profiles.js').then((m) => m.ProfilePage) },
  { path: '/customers', load: () => import('./pages/customers.js').then((m) => m.CustomersPage) },
  {
    path: '/customers/:id',
    load: () => import('./pages/customers.js').then((m) => m.CustomerPage),
  },
  {
    path: '/dashboards',
    load: () => import('./pages/dashboards.js').then((m) => m.DashboardsPage),
  },
  {
    path: '/dashboards/:id',
    load: () => import('./pages/dashboards.js').then((m) => m.DashboardPage),
  },
  { path: '/ota', load: () => import('./pages/ota.js').then((m) => m.OtaPage) },
  {
    path: '/rule-chains',
    load: () => import('./pages/rule-chains.js').then((m) => m.RuleChainsPage),
  },
  {
    path: '/rule-chains/:id',
    load: () => import('./pages/rule-chains.js').then((m) => m.RuleChainPage),
  },
  {
    path: '/notifications',
    load: () => import('./pages/notifications.js').then((m) => m.NotificationsPage),
  },
  { path: '/groups', load: () => import('./pages/groups.js').then((m) => m.GroupsPage) },
  {
    path: '/notification-center',
    load: () => import('./pages/notification-center.js').then((m) => m.NotificationCenterPage),
  },
  { path: '/settings', load: () => import('./pages/settings.js').then((m) => m.SettingsPage) },
  { path: '/upstream', load: () => import('./pages/upstream.js').then((m) => m.UpstreamPage) },
  {
    path: '/connectors',
    load: () => import('./pages/connectors.js').then((m) => m.ConnectorsPage),
  },
  { path: '/profile', load: () => import('./pages/profile.js').then((m) => m.UserProfilePage) },
];

const loaded = new Map<Loader, ComponentType<PageProps>>();

/** Renders a lazily loaded page; keeps loaded pages so going back is instant. */
function Lazy(props: { load: Loader; params: Record<string, string> }) {
  const [Page, setPage] = useState(() => loaded.get(props.load));
  const [error, setError] = useState('');
  useEffect(() => {
    if (loaded.has(props.load)) {
      setPage(() => loaded.get(props.load));
      return;
    }
    setPage(undefined);
    props
      .load()
      .then((p) => {
        loaded.set(props.load, p);
        setPage(() => p);
      })
      .catch((err: unknown) => setError(`Could not load the page: ${errorText(err)}`));
  }, [props.load]);
  if (error)
    return (
      <p role="alert" class="error">
        {error}
      </p>
    );
  if (!Page) return <p aria-busy="true">Loading…</p>;
  return <Page params={props.params} />;
}

const loadForgotPassword: Loader = () =>
  import('./pages/forgot-password.js').then((m) => m.ForgotPasswordPage);

function Login() {
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const [forgot, setForgot] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    setBusy(true);
    try {
      const body = await api<{ token: string; refreshToken: string }>('/api/auth/login', {
        body: { username: form.get('username'), password: form.get('password') },
      });
      session.set(body.token, body.refreshToken);
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  if (forgot)
    return (
      <main class="narrow">
        <Lazy load={loadForgotPassword} params={{}} />
      </main>
    );
  return (
    <main class="narrow">
      <form onSubmit={submit} class="card stack">
        <h1>Sign in</h1>
        <label>
          Email
          <input name="username" type="email" autocomplete="username" required />
        </label>
        <label>
          Password
          <input name="password" type="password" autocomplete="current-password" required />
        </label>
        <button type="submit" class="primary" disabled={busy}>
          Sign in
        </button>
        {error && (
          <p role="alert" class="error">
            {error}
          </p>
        )}
        <button type="button" class="link" onClick={() => setForgot(true)}>
          Forgot password?
        </button>
      </form>
    </main>
  );
}

/**
 * The unread notification count, live over the socket (`NOTIFICATIONS_COUNT`); undefined while
 * the gateway has no inbox API (404), and then the badge and the inbox link are not shown.
 */
function useUnreadCount(live: LiveClient): number | undefined {
  const [count, setCount] = useState<number | undefined>(undefined);
  useEffect(() => live.subscribeUnreadCount(setCount), [live]);
  return count;
}

function Nav(props: { user: User; path: string; live: LiveState; client: LiveClient }) {
  const unread = useUnreadCount(props.client);
  const items: Array<[string, string]> = [
    ['/devices', 'Devices'],
    ['/alarms', 'Alarms'],
    ...(isTenantAdmin(props.user)
      ? ([
          ['/profiles', 'Profiles'],
          ['/customers', 'Customers'],
          ['/groups', 'Groups'],
          ['/ota', 'OTA'],
          ['/rule-chains', 'Rule chains'],
          ['/notification-center', 'Notification setup'],
          ['/settings', 'Settings'],
          ['/upstream', 'Upstream'],
          ['/connectors', 'Connectors'],
        ] as Array<[string, string]>)
      : []),
    ['/dashboards', 'Dashboards'],
  ];
  const signOut = () => {
    void api('/api/auth/logout', { method: 'POST' }).catch(() => undefined);
    session.clear();
    navigate('/', true);
  };
  return (
    <header class="top">
      <strong class="brand">edge-gateway</strong>
      <nav aria-label="Main">
        {items.map(([href, label]) => (
          <Link
            key={href}
            href={href}
            aria-current={props.path.startsWith(href) ? 'page' : undefined}
          >
            {label}
          </Link>
        ))}
      </nav>
      <span class="who">
        {unread !== undefined && (
          <Link
            href="/notifications"
            class="bell"
            aria-label={`Notifications, ${unread} unread`}
            aria-current={props.path.startsWith('/notifications') ? 'page' : undefined}
          >
            Inbox
            {unread > 0 && <span class="count">{unread}</span>}
          </Link>
        )}
        <span class={`dot ${props.live}`} title={`Live data: ${props.live}`} />
        <span class="email">{props.user.email}</span>
        <Link
          href="/profile"
          class="me"
          aria-current={props.path === '/profile' ? 'page' : undefined}
        >
          Profile
        </Link>
        <button type="button" onClick={signOut}>
          Sign out
        </button>
      </span>
    </header>
  );
}

function Shell(props: { user: User }) {
  const { path } = useLocation();
  const live = useMemo(() => new LiveClient(), []);
  const [liveState, setLiveState] = useState(live.state);
  useEffect(() => {
    const off = live.onState(setLiveState);
    live.start();
    return () => {
      off();
      live.stop();
    };
  }, [live]);
  useEffect(() => {
    if (path === '/' || path.startsWith('/login')) navigate('/devices', true);
  }, [path]);
  let page = <p>Not found.</p>;
  for (const r of ROUTES) {
    const params = match(r.path, path);
    if (params) {
      page = <Lazy key={r.path} load={r.load} params={params} />;
      break;
    }
  }
  return (
    <Ctx.Provider value={{ user: props.user, live }}>
      <Nav user={props.user} path={path} live={liveState} client={live} />
      <main id="main">{page}</main>
    </Ctx.Provider>
  );
}

interface SystemInfo {
  version: string;
  https: { port: number; fingerprint256: string; selfSigned: boolean } | null;
}

/** The HTTPS certificate's fingerprint, for a technician to compare with the browser's. */
function CertificateInfo() {
  const [info, setInfo] = useState<SystemInfo | null>(null);
  useEffect(() => {
    void fetch('/api/system/info')
      .then((r) => r.json())
      .then(setInfo)
      // Without the info the footer stays empty; nothing else depends on it.
      .catch(() => setInfo(null));
  }, []);
  if (!info?.https) return null;
  return (
    <p>
      HTTPS on port {info.https.port}
      {info.https.selfSigned ? ' (self-signed certificate)' : ''}; SHA-256 fingerprint{' '}
      <code>{info.https.fingerprint256}</code>
    </p>
  );
}

function App() {
  const [token, setToken] = useState(session.token());
  const [user, setUser] = useState<User | null>(null);
  const [error, setError] = useState('');
  useEffect(() => session.onChange(() => setToken(session.token())), []);
  const signedIn = token !== '';
  useEffect(() => {
    setUser(null);
    setError('');
    if (!signedIn) return;
    api<User>('/api/auth/user')
      .then(setUser)
      .catch((err: unknown) => setError(errorText(err)));
  }, [signedIn]);
  let body = <Login />;
  if (token)
    body = user ? (
      <Shell key={user.id.id} user={user} />
    ) : error ? (
      <p role="alert" class="error">
        {error}
      </p>
    ) : (
      <p aria-busy="true">Loading…</p>
    );
  return (
    <>
      {body}
      <footer class="site">
        <CertificateInfo />
      </footer>
    </>
  );
}

const root = document.getElementById('app');
if (root) render(<App />, root);
