import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { parsePageQuery, requireUuid } from '../../common/entity.js';
import { ForbiddenError, PayloadTooLargeError, ValidationError } from '../../errors.js';
import { OTA_TYPES, type OtaService, type OtaType } from '../../ota/ota-service.js';
import { OTA_SORT } from '../../ota/ota-store.js';
import { type HttpEnv, queryRecord, readJson } from './context.js';
import type { RequireUser } from './middleware.js';

/** The upload route takes `ota.maxBytes` instead of the global `/api/*` body limit. */
export const OTA_UPLOAD_ROUTE = { method: 'POST', path: /^\/api\/otaPackage\/[^/]+$/ } as const;

/**
 * OTA packages on ThingsBoard's REST paths (platform.md §3.11), mounted at `/api`. Tenant
 * administrators only. Assignment is `firmwareId`/`softwareId` on `POST /api/device` and
 * `POST /api/deviceProfile`.
 */
export function otaRoutes(deps: { ota: OtaService; requireUser: RequireUser; maxBytes: number }) {
  const { ota } = deps;
  const app = new Hono<HttpEnv>();
  const admin = (authority: string) => {
    if (authority !== 'TENANT_ADMIN') throw new ForbiddenError();
  };
  const packageId = (raw: string | undefined) => requireUuid(raw, 'otaPackageId');

  app.post('/otaPackage', deps.requireUser, async (c) => {
    admin(c.var.principal.authority);
    return c.json(ota.save(await readJson(c)));
  });

  app.post(
    '/otaPackage/:id',
    deps.requireUser,
    bodyLimit({
      maxSize: deps.maxBytes,
      onError: () => {
        throw new PayloadTooLargeError(`OTA package is larger than ${deps.maxBytes} bytes`);
      },
    }),
    async (c) => {
      admin(c.var.principal.authority);
      const id = packageId(c.req.param('id'));
      const query = queryRecord(c);
      const contentType = c.req.header('content-type') ?? '';
      let data: Buffer;
      let fileName = query.fileName;
      let fileType: string | undefined;
      if (contentType.startsWith('multipart/form-data')) {
        // ThingsBoard's form: one part named `file`.
        const form = await c.req.parseBody();
        const file = form.file;
        if (!(file instanceof File)) throw new ValidationError('Multipart part "file" is required');
        data = Buffer.from(await file.arrayBuffer());
        fileName = file.name || fileName;
        fileType = file.type || undefined;
      } else if (contentType === '' || contentType.startsWith('application/octet-stream')) {
        data = Buffer.from(await c.req.arrayBuffer());
      } else {
        throw new ValidationError(
          'Send the file as multipart/form-data (part "file") or application/octet-stream',
        );
      }
      return c.json(
        ota.upload(id, {
          data,
          fileName,
          contentType: fileType,
          checksumAlgorithm: query.checksumAlgorithm,
          checksum: query.checksum,
        }),
      );
    },
  );

  app.get('/otaPackage/info/:id', deps.requireUser, (c) => {
    admin(c.var.principal.authority);
    return c.json(ota.get(packageId(c.req.param('id'))));
  });

  app.get('/otaPackage/:id', deps.requireUser, (c) => {
    admin(c.var.principal.authority);
    return c.json(ota.get(packageId(c.req.param('id'))));
  });

  app.get('/otaPackage/:id/download', deps.requireUser, (c) => {
    admin(c.var.principal.authority);
    const { info, data } = ota.data(packageId(c.req.param('id')));
    const name = encodeURIComponent(info.fileName ?? `${info.title}.bin`);
    c.header('Content-Disposition', `attachment; filename="${name}"`);
    c.header('x-filename', name);
    c.header('Content-Type', info.contentType ?? 'application/octet-stream');
    return c.body(new Uint8Array(data), 200);
  });

  app.delete('/otaPackage/:id', deps.requireUser, (c) => {
    admin(c.var.principal.authority);
    ota.delete(packageId(c.req.param('id')));
    return c.body(null, 200);
  });

  app.get('/otaPackages', deps.requireUser, (c) => {
    admin(c.var.principal.authority);
    return c.json(ota.list(parsePageQuery(queryRecord(c), OTA_SORT)));
  });

  // Packages with data that may be assigned to devices of a profile (the UI's picker).
  app.get('/otaPackages/:profileId/:type', deps.requireUser, (c) => {
    admin(c.var.principal.authority);
    const type = c.req.param('type') as OtaType;
    if (!OTA_TYPES.includes(type)) throw new ValidationError('type must be FIRMWARE or SOFTWARE');
    const profileId = requireUuid(c.req.param('profileId'), 'deviceProfileId');
    return c.json(
      ota.list(parsePageQuery(queryRecord(c), OTA_SORT), { profileId, type, hasData: true }),
    );
  });

  return app;
}
