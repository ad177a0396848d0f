/**
 * Which addresses may send a call's media: the SDP's address, the INVITE's and the latest
 * re-INVITE's source and the tenant's ranges, whatever form the socket writes them in; nothing
 * else.
 */
import { describe, expect, it } from 'vitest';
import { MediaSourcePolicy } from '../../../gateway/media/media-source-policy.ts';

describe('when a call names its media addresses', () => {
  it.each([
    ['the SDP address', '192.0.2.10', true],
    ['the SDP address as a dual-stack socket writes it', '::ffff:192.0.2.10', true],
    ['the INVITE source', '198.51.100.1', true],
    ['an address inside a tenant range', '203.0.113.77', true],
    ['an IPv6 address inside a tenant range', '2001:db8:0:0:0:0:0:5', true],
    ['a neighbour of the SDP address', '192.0.2.11', false],
    ['an address outside every range', '203.0.114.1', false],
    ['an IPv6 address outside every range', '2001:db9::5', false],
    ['something that is not an address', 'media.example.com', false],
  ])('should admit %s: %s -> %s', (_what, address, admitted) => {
    const policy = new MediaSourcePolicy({
      sdp: ['192.0.2.10'],
      signaling: '198.51.100.1',
      allowFrom: ['203.0.113.0/24', '2001:db8::/32'],
    });
    expect(policy.admits(address)).toBe(admitted);
  });

  it('should match an IPv6 SDP address written in another form than the socket writes it', () => {
    const policy = new MediaSourcePolicy({ sdp: ['2001:DB8:0:0::1'] });
    expect(policy.admits('2001:db8::1')).toBe(true);
    expect(policy.admits('2001:db8::2')).toBe(false);
  });

  it('should name nothing for a host name in c= (the media path resolves no names)', () => {
    const policy = new MediaSourcePolicy({ sdp: ['media.example.com'] });
    expect(policy.admits('media.example.com')).toBe(false);
    expect(policy.describe().sdp).toEqual(['media.example.com']);
  });
});

describe('when a re-INVITE names another SDP address', () => {
  it('should replace the SDP address and keep the INVITE source', () => {
    const policy = new MediaSourcePolicy({ sdp: ['192.0.2.10'], signaling: '198.51.100.1' });
    policy.nameSdp(['192.0.2.99']);
    expect(policy.admits('192.0.2.99')).toBe(true);
    expect(policy.admits('192.0.2.10')).toBe(false);
    expect(policy.admits('198.51.100.1')).toBe(true);
  });

  it('should keep the SDP address it had when the re-INVITE holds with the null address', () => {
    const policy = new MediaSourcePolicy({ sdp: ['192.0.2.10'] });
    policy.nameSdp(['0.0.0.0']);
    policy.nameSdp(['::']);
    expect(policy.admits('192.0.2.10')).toBe(true);
    expect(policy.admits('0.0.0.0')).toBe(false);
  });
});

describe('when a re-INVITE comes from another signaling source', () => {
  it('should name it beside the INVITE source, in place of an earlier re-INVITE source', () => {
    const policy = new MediaSourcePolicy({ sdp: ['192.0.2.10'], signaling: '198.51.100.1' });
    policy.nameSignaling('198.51.100.7');
    expect(policy.admits('198.51.100.7')).toBe(true);
    expect(policy.admits('198.51.100.1')).toBe(true);
    // The SDP of the same re-INVITE replaces the SDP address, not the signaling sources.
    policy.nameSdp(['192.0.2.99']);
    expect(policy.admits('198.51.100.7')).toBe(true);
    policy.nameSignaling('::ffff:198.51.100.8');
    expect(policy.admits('198.51.100.8')).toBe(true);
    expect(policy.admits('198.51.100.7')).toBe(false);
    expect(policy.describe()).toEqual({
      signaling: '198.51.100.1',
      reinvite: '198.51.100.8',
      sdp: ['192.0.2.99'],
    });
  });

  it.each([
    ['a host name', 'proxy.example.com'],
    ['the null address', '0.0.0.0'],
  ])('should name nothing for %s, and keep the earlier re-INVITE source', (_what, source) => {
    const policy = new MediaSourcePolicy({ signaling: '198.51.100.1' });
    policy.nameSignaling('198.51.100.7');
    policy.nameSignaling(source);
    expect(policy.admits(source)).toBe(false);
    expect(policy.admits('198.51.100.7')).toBe(true);
  });
});

describe('when nothing names any address', () => {
  it('should admit nobody', () => {
    const policy = new MediaSourcePolicy();
    expect(policy.admits('127.0.0.1')).toBe(false);
    expect(policy.admits('::1')).toBe(false);
  });
});
