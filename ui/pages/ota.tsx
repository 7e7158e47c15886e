import { useEffect, useState } from 'preact/hooks';
import { BarButton, DeleteButton, ListPage, usePagedList } from '../components/list.js';
import { Dialog, ErrorText, FormButtons, formatTs, useAction, useLoad } from '../components/ui.js';
import { api, type Id, type PageData, qs } from '../lib/api.js';
import { useApp } from '../lib/app-context.js';

/**
 * OTA packages: upload (title, version, type, profile, file), assign to a device profile, and
 * each device's progress from its `fw_state`/`sw_state` telemetry (live).
 */

interface OtaPackage {
  id: Id;
  createdTime: number;
  title: string;
  version: string;
  type: 'FIRMWARE' | 'SOFTWARE';
  deviceProfileId: Id | null;
  fileName: string | null;
  dataSize: number | null;
  checksum: string | null;
  hasData?: boolean;
}

interface Profile {
  id: Id;
  name: string;
  firmwareId?: Id | null;
  softwareId?: Id | null;
  [k: string]: unknown;
}

export function OtaPage() {
  const [uploading, setUploading] = useState(false);
  const [progressOf, setProgressOf] = useState<OtaPackage | null>(null);
  const list = usePagedList<OtaPackage>(
    (page) =>
      `/api/otaPackages${qs({ pageSize: 20, page, sortProperty: 'createdTime', sortOrder: 'DESC' })}`,
  );
  const profiles = useLoad(
    () => api<PageData<Profile>>(`/api/deviceProfiles${qs({ pageSize: 100, page: 0 })}`),
    [],
  );
  const act = useAction();
  const profileName = (id: string | undefined) =>
    profiles.data?.data.find((p) => p.id.id === id)?.name ?? '';
  const assign = (pkg: OtaPackage) =>
    void act
      .run(async () => {
        const profile = await api<Profile>(`/api/deviceProfile/${pkg.deviceProfileId?.id}`);
        const field = pkg.type === 'FIRMWARE' ? 'firmwareId' : 'softwareId';
        await api('/api/deviceProfile', {
          body: { ...profile, [field]: { entityType: 'OTA_PACKAGE', id: pkg.id.id } },
        });
      })
      .then(profiles.reload);
  const assigned = (pkg: OtaPackage) => {
    const p = profiles.data?.data.find((x) => x.id.id === pkg.deviceProfileId?.id);
    return (pkg.type === 'FIRMWARE' ? p?.firmwareId?.id : p?.softwareId?.id) === pkg.id.id;
  };
  return (
    <ListPage
      title="OTA packages"
      actions={<BarButton primary label="Upload package" onClick={() => setUploading(true)} />}
      error={act.error}
      label="OTA packages"
      list={list}
      rowKey={(p) => p.id.id}
      columns={[
        { title: 'Title', cell: (p) => p.title },
        { title: 'Version', cell: (p) => p.version },
        { title: 'Type', cell: (p) => p.type },
        { title: 'Profile', cell: (p) => profileName(p.deviceProfileId?.id) },
        {
          title: 'File',
          wide: true,
          cell: (p) => `${p.fileName ?? ''} ${p.dataSize ? `(${p.dataSize} B)` : ''}`,
        },
        { title: 'Created', wide: true, cell: (p) => formatTs(p.createdTime) },
        {
          title: 'Actions',
          class: 'actions',
          cell: (p) => (
            <>
              {assigned(p) ? (
                <span class="badge ok">Assigned</span>
              ) : (
                <button type="button" onClick={() => assign(p)} disabled={!p.deviceProfileId}>
                  Assign to profile
                </button>
              )}
              <button type="button" onClick={() => setProgressOf(p)}>
                Progress
              </button>
              <a href={`/api/otaPackage/${p.id.id}/download`} download>
                Download
              </a>
              <DeleteButton
                act={act}
                what={`${p.title} ${p.version}`}
                path={`/api/otaPackage/${p.id.id}`}
                then={list.reload}
              />
            </>
          ),
        },
      ]}
    >
      {progressOf && (
        <Progress pkg={progressOf} profile={profileName(progressOf.deviceProfileId?.id)} />
      )}
      {uploading && (
        <UploadDialog
          profiles={profiles.data?.data ?? []}
          onClose={() => setUploading(false)}
          onDone={() => {
            setUploading(false);
            list.reload();
          }}
        />
      )}
    </ListPage>
  );
}

function UploadDialog(props: { profiles: Profile[]; onClose: () => void; onDone: () => void }) {
  const act = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const file = f.get('file');
    void act
      .run(async () => {
        const pkg = await api<OtaPackage>('/api/otaPackage', {
          body: {
            title: String(f.get('title')),
            version: String(f.get('version')),
            type: String(f.get('type')),
            deviceProfileId: { entityType: 'DEVICE_PROFILE', id: String(f.get('profile')) },
          },
        });
        if (file instanceof File && file.size > 0) {
          const form = new FormData();
          form.set('file', file);
          await api(`/api/otaPackage/${pkg.id.id}${qs({ checksumAlgorithm: 'SHA256' })}`, {
            body: form,
            raw: true,
          });
        }
      })
      .then((ok) => ok && props.onDone());
  };
  return (
    <Dialog title="Upload package" onClose={props.onClose}>
      <form class="stack" onSubmit={submit}>
        <label>
          Title
          <input name="title" required />
        </label>
        <label>
          Version
          <input name="version" required />
        </label>
        <label>
          Type
          <select name="type">
            <option value="FIRMWARE">Firmware</option>
            <option value="SOFTWARE">Software</option>
          </select>
        </label>
        <label>
          Device profile
          <select name="profile">
            {props.profiles.map((p) => (
              <option key={p.id.id} value={p.id.id}>
                {p.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          File
          <input name="file" type="file" required />
        </label>
        <ErrorText error={act.error} />
        <FormButtons onCancel={props.onClose} busy={act.busy} label="Upload" />
      </form>
    </Dialog>
  );
}

/** The devices of the package's profile and their update state, live. */
function Progress(props: { pkg: OtaPackage; profile: string }) {
  const { live } = useApp();
  const prefix = props.pkg.type === 'FIRMWARE' ? 'fw' : 'sw';
  const devices = useLoad(
    () =>
      api<PageData<{ id: Id; name: string; type: string }>>(
        `/api/tenant/devices${qs({ pageSize: 200, page: 0, sortProperty: 'name', sortOrder: 'ASC' })}`,
      ).then((p) => p.data.filter((d) => d.type === props.profile)),
    [props.profile],
  );
  const [states, setStates] = useState<Record<string, Record<string, string>>>({});
  useEffect(() => {
    const keys = [`${prefix}_state`, `${prefix}_title`, `${prefix}_version`, `${prefix}_error`];
    const offs = (devices.data ?? []).map((d) =>
      live.subscribe({ type: 'TIMESERIES', entityId: d.id.id, keys }, (data) =>
        setStates((s) => {
          const next = { ...(s[d.id.id] ?? {}) };
          for (const [k, pts] of Object.entries(data)) next[k] = pts[pts.length - 1]?.[1] ?? '';
          return { ...s, [d.id.id]: next };
        }),
      ),
    );
    return () => {
      for (const off of offs) off();
    };
  }, [devices.data, prefix]);
  return (
    <section aria-labelledby="h-progress">
      <h2 id="h-progress">
        Progress: {props.pkg.title} {props.pkg.version} on {props.profile}
      </h2>
      <ErrorText error={devices.error} />
      <table aria-label="Update progress">
        <thead>
          <tr>
            <th>Device</th>
            <th>State</th>
            <th>Package</th>
          </tr>
        </thead>
        <tbody>
          {devices.data?.map((d) => {
            const s = states[d.id.id] ?? {};
            return (
              <tr key={d.id.id} data-device={d.name}>
                <td>{d.name}</td>
                <td class="state">{s[`${prefix}_state`] ?? '–'}</td>
                <td>
                  {s[`${prefix}_title`] ?? ''} {s[`${prefix}_version`] ?? ''}{' '}
                  {s[`${prefix}_error`] ?? ''}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </section>
  );
}
