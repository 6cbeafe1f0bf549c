"""Diagnostic, at a random initialisation of surf-tiny's layout (640-px tile, rows at 30x the text RMS): does
the image row of the token that holds the target point the same way in every image? For each image, that row
minus the image's median row, normalised; printed is the mean cosine over pairs of images, for a white square
on black, a square in random colours on random backgrounds, and synthetic pages of one component. A fixed
query finds a target whose direction is the same everywhere from the first step.

  python3 dev/target_consistency.py   (fonts in /tmp/fonts, as train/README.md packs them)
"""
import sys, json, random, torch, numpy as np
sys.path.insert(0,'.'); sys.path.insert(0,'dev')
from read_probe import small_model_dir
from train.surf_tiny import synth, spec
from train.surf_tiny.model import SurfTiny, init_weights
from train.surf_tiny.train import normalise
tile=640; side=tile//32
d=small_model_dir(tile)
m=SurfTiny(json.load(open(d+'/config.json'))); init_weights(m,1); m.mlp1.fc2.weight.data.mul_(30)
m.eval()
maker=synth.Maker(d,'/tmp/fonts',sparse=True)
rng=random.Random(5)
def rows(imgs):
    x=normalise(torch.from_numpy(np.stack(imgs)),'cpu')
    with torch.no_grad(): return m.image_rows(x).float().view(len(imgs),side*side,-1)
def consistency(imgs, centres):
    r=rows(imgs); vs=[]
    for k,(cx,cy) in enumerate(centres):
        t=min(side-1,int(cy*side//1000))*side+min(side-1,int(cx*side//1000))
        v=r[k,t]-r[k].median(0).values; vs.append(v/v.norm())
    V=torch.stack(vs); C=V@V.T; n=len(vs)
    return float((C.sum()-n)/(n*n-n))
N=24
pages,pc=[],[]
while len(pages)<N:
    size=rng.choice([(400,300),(320,240),(480,360)])
    p=synth.Page(rng,maker.fonts,*size).paint_sparse(1)
    if not p.elements: continue
    t,_=spec.ga.tile_image(p.img, tile, spec.SIZES["max_tiles"], True)
    pages.append(np.asarray(t[0],np.uint8)); s=maker.sequences(p); pc.append(s[0][2])
def dots(colours):
    imgs,cs=[],[]
    for k in range(N):
        a=np.zeros((tile,tile,3),np.uint8)
        if colours:
            back=np.array([rng.randrange(256) for _ in range(3)])
            while True:
                c=np.array([rng.randrange(256) for _ in range(3)])
                if np.abs(c-back).sum()>=240: break
            a[:]=back
        x,y=rng.randrange(0,tile-80),rng.randrange(0,tile-80); a[y:y+80,x:x+80]=c if colours else 255
        imgs.append(a); cs.append(((x+40)*1000//tile,(y+40)*1000//tile))
    return imgs,cs
print('white square on black: %.3f'%consistency(*dots(False)))
print('square in random colours: %.3f'%consistency(*dots(True)))
print('one-component pages: %.3f'%consistency(pages,pc))
