import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';

/** Minimal page: sign in, then list devices. The full UI is its own issue. */

interface Device {
  id: { id: string };
  name: string;
  type: string;
  createdTime: number;
}

function Login(props: { onToken: (t: string) => void }) {
  const [error, setError] = useState('');
  const submit = async (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const res = await fetch('/api/auth/login', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: form.get('username'), password: form.get('password') }),
    });
    const body = await res.json();
    if (res.ok) props.onToken(body.token);
    else setError(body.message ?? `Login failed (${res.status})`);
  };
  return (
    <form onSubmit={submit}>
      <h2>Sign in</h2>
      <input name="username" placeholder="Email" autocomplete="username" />
      <input
        name="password"
        type="password"
        placeholder="Password"
        autocomplete="current-password"
      />
      <button type="submit">Sign in</button>
      {error && <p class="error">{error}</p>}
    </form>
  );
}

function Devices(props: { token: string }) {
  const [devices, setDevices] = useState<Device[]>([]);
  useEffect(() => {
    void fetch('/api/tenant/devices?pageSize=100&page=0&sortProperty=name', {
      headers: { 'X-Authorization': `Bearer ${props.token}` },
    })
      .then((r) => r.json())
      .then((p: { data: Device[] }) => setDevices(p.data ?? []))
      // A failed list leaves the table empty; the next sign-in retries.
      .catch(() => setDevices([]));
  }, [props.token]);
  return (
    <table>
      <thead>
        <tr>
          <th>Name</th>
          <th>Profile</th>
          <th>Created</th>
        </tr>
      </thead>
      <tbody>
        {devices.map((d) => (
          <tr key={d.id.id}>
            <td>{d.name}</td>
            <td>{d.type}</td>
            <td>{new Date(d.createdTime).toLocaleString()}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function App() {
  const [token, setToken] = useState(() => sessionStorage.getItem('token') ?? '');
  const keep = (t: string) => {
    sessionStorage.setItem('token', t);
    setToken(t);
  };
  return (
    <>
      <header>
        <strong>edge-gateway</strong>
        {token && (
          <button type="button" onClick={() => keep('')}>
            Sign out
          </button>
        )}
      </header>
      <main>{token ? <Devices token={token} /> : <Login onToken={keep} />}</main>
    </>
  );
}

const root = document.getElementById('app');
if (root) render(<App />, root);
